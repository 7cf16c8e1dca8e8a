"""NatureQNetwork: shapes, the shared-bias head, parameter counts, uint8 scaling, init."""

import math

import pytest
import torch
from torch.nn import functional as F

from agents.networks import MinAtarQNetwork, NatureQNetwork, build_network


def _hand_count(num_actions: int, history: int = 4) -> int:
    conv1 = 32 * history * 8 * 8 + 32
    conv2 = 64 * 32 * 4 * 4 + 64
    conv3 = 64 * 64 * 3 * 3 + 64
    fc = 3136 * 512 + 512
    head = 512 * num_actions + 1  # no per-action bias, one shared scalar
    return conv1 + conv2 + conv3 + fc + head


def _frames(batch: int, history: int = 4, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (batch, history, 84, 84), dtype=torch.uint8, generator=generator)


def test_output_shape_and_dtype():
    net = NatureQNetwork(6, 4, (84, 84))
    q = net(_frames(3))
    assert q.shape == (3, 6)
    assert q.dtype == torch.float32


def test_the_nature_dqn_head_has_a_bias_per_action():
    """`nature_dqn`: the same body, and 512 x A weights plus A biases in the head."""
    shared, per_action = (build_network(name, 6, 4, (84, 84)) for name in ("nature", "nature_dqn"))
    count = sum(p.numel() for p in per_action.parameters())
    assert count == sum(p.numel() for p in shared.parameters()) - 1 + 6
    with torch.no_grad():
        per_action.head.weight.zero_()
        per_action.head.bias.copy_(torch.arange(6.0))
    assert per_action(_frames(2)).tolist() == [list(range(6))] * 2


def test_history_length_sets_input_channels():
    net = NatureQNetwork(2, 2, (84, 84))
    assert net(_frames(1, history=2)).shape == (1, 2)


@pytest.mark.parametrize(("num_actions", "expected"), [(4, 1_686_177), (18, 1_693_345)])
def test_parameter_count_matches_hand_computation(num_actions, expected):
    net = NatureQNetwork(num_actions, 4, (84, 84))
    assert _hand_count(num_actions) == expected
    assert sum(p.numel() for p in net.parameters()) == expected


def test_head_has_exactly_one_shared_bias_scalar():
    net = NatureQNetwork(5, 4, (84, 84))
    head_parameters = {n: p for n, p in net.named_parameters() if n.startswith("head")}
    assert set(head_parameters) == {"head.weight", "head_bias"}
    assert net.head.bias is None
    assert net.head_bias.numel() == 1
    frames = _frames(4)
    with torch.no_grad():
        before = net(frames)
        net.head_bias += 0.75
        after = net(frames)
    torch.testing.assert_close(after - before, torch.full((4, 5), 0.75), rtol=0, atol=1e-5)


def test_uint8_input_is_scaled_by_255():
    net = NatureQNetwork(3, 4, (84, 84))

    def q_from_scaled(scaled: torch.Tensor) -> torch.Tensor:
        return net.head(net.features(scaled)) + net.head_bias

    with torch.no_grad():
        full = net(torch.full((2, 4, 84, 84), 255, dtype=torch.uint8))
        torch.testing.assert_close(full, q_from_scaled(torch.ones(2, 4, 84, 84)), rtol=0, atol=0)
        frames = _frames(2)
        torch.testing.assert_close(
            net(frames), q_from_scaled(frames.float() / 255.0), rtol=0, atol=0
        )


def test_float_input_is_rejected():
    with pytest.raises(TypeError, match="uint8"):
        NatureQNetwork(3, 4, (84, 84))(torch.zeros(1, 4, 84, 84))


def test_init_is_uniform_within_one_over_sqrt_fan_in():
    net = NatureQNetwork(4, 4, (84, 84))
    layers = [m for m in net.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    for layer in layers:
        bound = 1.0 / math.sqrt(layer.weight[0].numel())
        assert layer.weight.abs().max() <= bound
        assert layer.weight.abs().max() > 0.9 * bound  # spread over the whole interval
        if layer.bias is not None:
            assert layer.bias.abs().max() <= bound
    assert abs(net.head_bias.item()) <= 1.0 / math.sqrt(512)


def _tensorflow_same(frames: torch.Tensor, conv: torch.nn.Conv2d) -> torch.Tensor:
    """TensorFlow's "same" convolution: ceil(n / s) outputs, the padding they need split with
    the odd pixel after (tf.nn.convolution's documentation)."""
    (kernel, _), (stride, _), size = conv.kernel_size, conv.stride, frames.shape[-1]
    total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
    before = total // 2
    padded = F.pad(frames, (before, total - before) * 2)
    return torch.relu(F.conv2d(padded, conv.weight, conv.bias, stride))


def test_the_dopamine_network_is_dopamines():
    """`dopamine`: the Nature layers convolved as TensorFlow's "same" (maps of 21, 11 and 11
    pixels), a bias per action, Glorot-uniform weights and zero biases."""
    net = build_network("dopamine", 4, 4, (84, 84))
    convolutions = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    frames = _frames(2)
    maps = frames.float() / 255.0
    for conv in convolutions:
        maps = _tensorflow_same(maps, conv)
    assert maps.shape == (2, 64, 11, 11)
    reference = net.head(net.features[-2:](maps.flatten(1)))
    torch.testing.assert_close(net(frames), reference, rtol=1e-5, atol=1e-6)
    body = 32 * 4 * 64 + 32 + 64 * 32 * 16 + 64 + 64 * 64 * 9 + 64 + 64 * 11 * 11 * 512 + 512
    assert sum(p.numel() for p in net.parameters()) == body + 512 * 4 + 4 == 4_045_476
    for layer in [m for m in net.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]:
        fan_in, fan_out = layer.weight[0].numel(), layer.weight.numel() // layer.weight.shape[1]
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        assert 0.9 * bound < layer.weight.abs().max() <= bound
        assert not layer.bias.any()


@pytest.mark.parametrize(("channels", "num_actions"), [(4, 6), (10, 6), (7, 3)])
def test_the_minatar_network_has_minatars_layers(channels, num_actions):
    """One 3x3 conv of 16 filters (stride 1, so 8x8 outputs), 128 hidden units, one output per
    action, biases everywhere: MinAtar's examples/dqn.py."""
    net = MinAtarQNetwork(num_actions, 1, (channels, 10, 10))
    expected = (16 * channels * 9 + 16) + (16 * 8 * 8 * 128 + 128) + (128 * num_actions)
    assert sum(p.numel() for p in net.parameters()) == expected + num_actions
    frames = torch.randint(0, 2, (5, 1, channels, 10, 10), dtype=torch.uint8)
    q = net(frames)
    assert q.shape == (5, num_actions) and q.dtype == torch.float32


def test_the_minatar_network_is_the_plain_layers_function():
    """Channels-last is a memory layout only: the same values as the layers applied in order
    to the frames as floats, flattened channel-major as MinAtar does."""
    net = MinAtarQNetwork(6, 2, (4, 10, 10))
    frames = torch.randint(0, 2, (3, 2, 4, 10, 10), dtype=torch.uint8)
    grids = frames.reshape(3, 8, 10, 10).float().contiguous()
    conv = torch.nn.functional.conv2d(grids, net.conv.weight.contiguous(), net.conv.bias)
    hidden = torch.relu(net.hidden(torch.relu(conv).reshape(3, -1)))
    torch.testing.assert_close(net(frames), net.output(hidden), rtol=1e-5, atol=1e-6)


def test_networks_by_name_refuse_frames_they_do_not_take():
    assert isinstance(build_network("minatar", 6, 1, (4, 10, 10)), MinAtarQNetwork)
    with pytest.raises(ValueError) as error:
        build_network("nature", 6, 1, (4, 10, 10))
    assert str(error.value) == (
        "agent.network=nature is not allowed here: the Nature network takes 84x84 frames, "
        "not (4, 10, 10)"
    )
    with pytest.raises(ValueError, match="agent.network=mlp is not allowed: must be one of"):
        build_network("mlp", 6, 1, (84, 84))
    with pytest.raises(TypeError, match="uint8"):
        MinAtarQNetwork(6, 1, (4, 10, 10))(torch.zeros(1, 1, 4, 10, 10))
