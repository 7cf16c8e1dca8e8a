"""Per-transition quantities of a Double DQN update, from per-sample gradients (torch.func):
`replay.priority_signal=parameter_change`. Why the importance weight is left out of a
transition's own gradient, and why its norm is divided by the batch's mean: docs/replay.md."""

from __future__ import annotations

import torch
from torch.func import functional_call, grad, vmap

from agents.optimizer import CenteredRMSProp


def parameter_change_norms(
    network: torch.nn.Module,
    optimizer: CenteredRMSProp,
    states: torch.Tensor,
    actions: torch.Tensor,
    targets: torch.Tensor,
    weights: torch.Tensor,
    td_error_clip: float,
) -> torch.Tensor:
    """How far each transition alone moves the network in the step the optimizer is about to
    take (the patent's "norm of the induced weight change"), on the scale of |δ|: (B,), at the
    update's θ, before the step (changing nothing). With B = len(actions), κ = `td_error_clip`,
    δ_i = y_i − Q(s_i, a_i; θ) and the optimizer's lr, decay and ε:

        g_i  = −clip(δ_i, ±κ) ∇θ Q(s_i, a_i)         transition i's gradient of Huber_κ(δ_i)
        ḡ    = (1/B) Σ_j w_j g_j                     the batch gradient the step uses
        D    = sqrt(v − m² + ε)                      m, v: RMSProp's g and g2 after the step
                                                     (sqrt(v − m²) + ε: `torch_rmsprop`)
        s_i  = ‖∇θ Q(s_i, a_i) / D‖₂,  Δθ_i = −lr · (g_i / B) / D   (i's share of the step)
        norm_i = ‖Δθ_i‖₂ / (lr / B · mean_j s_j) = |clip(δ_i, ±κ)| · s_i / mean_j s_j

    ∇θ Q(s_i, a_i) per sample: `torch.func.vmap(grad(...))`, 4·B·P bytes for P parameters."""
    groups = optimizer.param_groups
    if len(groups) != 1:
        raise ValueError(f"parameter_change_norms needs one parameter group, got {len(groups)}")
    decay, epsilon = groups[0]["decay"], groups[0]["epsilon"]
    params = {name: param.detach() for name, param in network.named_parameters()}
    buffers = {name: buffer.detach() for name, buffer in network.named_buffers()}

    def q_taken(params, state, action):
        q = functional_call(network, (params, buffers), (state.unsqueeze(0),))[0]
        q_action = q.gather(0, action.unsqueeze(0))[0]
        return q_action, q_action

    per_sample = vmap(grad(q_taken, has_aux=True), in_dims=(None, 0, 0))
    q_gradients, q_values = per_sample(params, states, actions)
    clipped_errors = (targets - q_values).clamp(-td_error_clip, td_error_clip)
    # ḡ = (1/B) Σ w_j g_j with g_j = −clip(δ_j) ∇Q_j.
    batch_coefficients = -(weights * clipped_errors) / len(actions)
    sensitivities = torch.zeros_like(q_values)
    for name, param in network.named_parameters():
        gradients = q_gradients[name]
        batch_gradient = torch.tensordot(batch_coefficients, gradients, dims=1)
        state = optimizer.state[param]
        # In place on fresh tensors: each pass over a parameter-sized tensor costs.
        grad_avg = state["grad_avg"].lerp(batch_gradient, 1.0 - decay)
        square_avg = state["square_avg"].lerp(batch_gradient.square_(), 1.0 - decay)
        spread = square_avg.addcmul_(grad_avg, grad_avg, value=-1.0)
        if optimizer.epsilon_inside:
            divisor = spread.add_(epsilon).rsqrt_()
        else:
            divisor = spread.sqrt_().add_(epsilon).reciprocal_()
        scaled = gradients.mul_(divisor)
        sensitivities += torch.linalg.vector_norm(scaled.reshape(len(actions), -1), dim=1) ** 2
    sensitivities = sensitivities.sqrt()
    mean = sensitivities.mean().clamp_min(torch.finfo(sensitivities.dtype).tiny)
    return clipped_errors.abs() * sensitivities / mean
