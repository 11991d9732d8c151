"""Divergences from eager found by hand probes in session 36, each a parity test against eager."""

from __future__ import annotations

import pytest
import torch

from stillframe.check.parity import assert_parity


def _inference(*shape):
    with torch.inference_mode():
        return torch.randn(*shape)


def _add_into(x, w):
    y = x * 3
    x.add_(1)
    return x * 2 + y


def _index_write(x, w):
    x[0] = 5.0
    return x.sum()


def _write_inside_inference_mode(x, w):
    with torch.inference_mode():
        x.add_(1)
    return x * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [_add_into, _index_write, _write_inside_inference_mode], ids=lambda f: f.__name__)
def test_write_into_an_inference_tensor_input(fn, backend):
    # an input made under torch.inference_mode, written outside it: eager raises "Inplace update to inference tensor
    # outside InferenceMode is not allowed" at the write; on aot_eager it came out of AOTAutograd's compile as
    # BackendCompilerFailed (torch.compile raises eager's RuntimeError)
    assert_parity(fn, lambda i=0: (_inference(3, 3), torch.randn(3, 3, requires_grad=True)), backend=backend, calls=3)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("options", [{}, {"num_layers": 2, "bidirectional": True}], ids=["one_layer", "two_layers"])
def test_lstm_with_a_gradient(options, backend):
    # nn.LSTM traced into an aot_eager graph: AOTAutograd saved an undefined tensor of torch.lstm's CPU kernel and its
    # compiled forward raised "expected all tensors_saved_with_vc_check to be Tensors"; the plan then ran eagerly
    # with a warning asking for a bug report (torch.compile does not trace nn.LSTM)
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4, batch_first=True, **options)

    def fn(x, w):
        out, (h, c) = lstm(x.unsqueeze(0))
        return out.sum() * w.sum(), h, c

    assert_parity(fn, lambda i=0: (torch.randn(3, 3), torch.randn(3, 3, requires_grad=True)), backend=backend, calls=3)
