"""Notebook 04's self-checks accept the right answers and reject realistic wrong ones."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.exercises.nb04 import check_buckets, check_graph_prediction, check_sampler

# The notebook's request lengths (random.Random(4), as its exercise cell draws them).
LENGTHS = [10, 11, 15, 17, 20, 21, 23, 23, 24, 24, 26, 30, 32, 32, 39, 39, 62, 77, 91, 95, 97, 114]
LENGTHS += [187, 193, 208, 215, 216, 231, 232, 254]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# Exercise 1: predict the graph count.


def test_prediction_not_answered_and_right():
    assert check_graph_prediction(None) == "Exercise 1: not answered yet."
    assert check_graph_prediction(4) == "Exercise 1: correct."


@pytest.mark.parametrize(
    "wrong",
    [
        2,  # forgot that float64 fails every dtype guard
        3,  # forgot that size 1 is specialized (the dynamic graph assumes size >= 2)
        5,  # one graph per distinct shape, as with dynamic=False
        6,  # one graph per call
    ],
)
def test_prediction_wrong(wrong):
    with pytest.raises(AssertionError, match="expected 4"):
        check_graph_prediction(wrong)


@pytest.mark.parametrize("bad", ["4", 4.0, True])
def test_prediction_bad_type_names_the_argument(bad):
    with pytest.raises(TypeError, match="prediction"):
        check_graph_prediction(bad)


# Exercise 2: buckets.


def test_buckets_not_answered_and_right():
    assert check_buckets(None, LENGTHS) == "Exercise 2: not answered yet."
    assert check_buckets((40, 130, 256), LENGTHS).startswith("Exercise 2: correct, 3 graphs")
    assert check_buckets([256, 40, 130], LENGTHS).startswith("Exercise 2: correct")  # any order


@pytest.mark.parametrize(
    ("wrong", "match"),
    [
        ((64, 128, 256), "padding makes 1.42x"),  # the powers of two: too much padding
        ((40, 130), "does not fit"),  # the longest request has no bucket
        ((40, 64, 130, 256), "4 graphs compiled"),  # finer, but one graph too many
        ((256,), "padding"),  # one bucket: one graph, but mostly padding
    ],
)
def test_buckets_wrong(wrong, match):
    with pytest.raises(AssertionError, match=match):
        check_buckets(wrong, LENGTHS)


@pytest.mark.parametrize(("bad", "error"), [("64,128", TypeError), ((), TypeError), ((0, 256), ValueError)])
def test_buckets_bad_input_names_the_argument(bad, error):
    with pytest.raises(error, match="buckets"):
        check_buckets(bad, LENGTHS)


# Exercise 3: a sampler whose temperature changes without recompiling.


class FloatSampler(nn.Module):
    """The exercise as given: the temperature is a Python float, baked into the graph."""

    def __init__(self):
        super().__init__()
        self.temperature = 1.0

    def set_temperature(self, value: float) -> None:
        self.temperature = value

    def forward(self, logits):
        return torch.softmax(logits / self.temperature, dim=-1)


class BufferSampler(FloatSampler):
    """The solution: a buffer updated in place."""

    def __init__(self):
        super().__init__()
        del self.temperature
        self.register_buffer("temperature", torch.tensor(1.0))

    def set_temperature(self, value: float) -> None:
        self.temperature.fill_(value)


class NewTensorSampler(FloatSampler):
    """Also right: a new tensor each time is a new graph input, not a constant."""

    def __init__(self):
        super().__init__()
        self.temperature = torch.tensor(1.0)

    def set_temperature(self, value: float) -> None:
        self.temperature = torch.tensor(value)


class DisabledSampler(FloatSampler):
    """Finding 16: nothing compiled, so nothing can recompile."""

    @torch.compiler.disable
    def forward(self, logits):
        return torch.softmax(logits / self.temperature, dim=-1)


class DisabledHelperSampler(FloatSampler):
    """The division moved out of the graph: a graph break, the temperature never seen by Dynamo."""

    @torch.compiler.disable
    def scale(self, logits):
        return logits / self.temperature

    def forward(self, logits):
        return torch.softmax(self.scale(logits), dim=-1)


class ItemSampler(BufferSampler):
    """A buffer read back as a Python float: a graph break, then a constant again."""

    def forward(self, logits):
        return torch.softmax(logits / float(self.temperature), dim=-1)


class TensorOfFloatSampler(FloatSampler):
    """torch.tensor(a Python float) inside forward: still a constant in the graph."""

    def forward(self, logits):
        return torch.softmax(logits / torch.tensor(self.temperature), dim=-1)


class IgnoresTemperatureSampler(BufferSampler):
    """Never recompiles because the temperature no longer matters: wrong results."""

    def forward(self, logits):
        return torch.softmax(logits, dim=-1)


def test_sampler_not_answered_and_right():
    assert check_sampler(None) == "Exercise 3: not answered yet."
    assert check_sampler(BufferSampler).startswith("Exercise 3: correct")
    assert check_sampler(NewTensorSampler).startswith("Exercise 3: correct")


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize(
    ("wrong", "match"),
    [
        (FloatSampler, "recompiled"),
        (TensorOfFloatSampler, "recompiled"),
        (DisabledSampler, "compiled no graph"),
        (DisabledHelperSampler, "graph break"),
        (ItemSampler, "graph break"),
        (IgnoresTemperatureSampler, "not softmax"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_sampler_wrong(wrong, match):
    with pytest.raises(AssertionError, match=match):
        check_sampler(wrong)


@pytest.mark.parametrize("bad", [BufferSampler(), "BufferSampler", nn.Linear])
def test_sampler_bad_input_names_the_argument(bad):
    with pytest.raises(TypeError, match="sampler_class"):
        check_sampler(bad)
