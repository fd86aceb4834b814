"""How fast can one PPO minibatch step of many vmapped agents run? Formulations compared.

At thousands of agents the epochs dominate an update on a GPU (docs/guides/gpu-design.md, "Where
the time goes at thousands of agents"). This experiment times 16 minibatch steps (one
`lax.scan`, as the "unrolled" layout's flat epochs) of the standard CartPole agent (a
64-64 tanh actor and critic, 4 observation features, 2 actions, 128 samples per
minibatch, `purejaxppo.losses.ppo_loss`, global-norm clip 0.5 and Adam on the tree of
params), vmapped over `--agents` agents, in several formulations of the same math:

  sep       actor and critic as two MLPs (what `networks.ActorCritic` computes)
  stack     the actor's and critic's hidden layers stacked: one `[2, ...]` batched matmul
            per layer instead of two (heads separate); the same math
  bmajor    `sep` with the agent axis second in the data (`[M, A, ...]`, vmap in_axes=1)
  highest   `sep` with `jax.default_matmul_precision("highest")` (no TF32 on a GPU)
  bf16      `sep` with bfloat16 matmul inputs (float32 accumulation): other math, for scale
  gradonly  `sep` without the optimizer (loss and gradient only): what Adam costs
  xla       the library's gradient (`update.make_minibatch_grads`, fused_kernels "off")
            on its networks for CartPole-v1, then clip and Adam as `sep`
  fused     the same with the library's fused kernels (`purejaxppo.fused`: the actor's and
            the critic's loss and gradient, each one Pallas program per agent; Pallas'
            interpret mode with `--interpret`, for a CPU)

(On 2026-11-27, results/gpu-fused-20261127.json, the kernels were still this script's
own: `split4` was what `purejaxppo.fused` now computes; `pallas4` / `pallas8` (one kernel
for both towers, 4 / 8 warps) and `split8` (8 warps) were slower and were dropped.)

and prints ms per minibatch step, each formulation compiled on its own, best of `--reps`.
Random data, no learning: this measures speed, not returns.

    python -m benchmarks.experiments.minibatch_step --agents 64 --reps 3       # CPU smoke
    python -m benchmarks.experiments.minibatch_step --agents 1024 4096 --json out.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import optax

from purejaxppo.losses import ppo_loss

FORMS = ("sep", "stack", "bmajor", "highest", "bf16", "gradonly", "xla", "fused")
OBS, ACTIONS, HIDDEN, MINIBATCH, STEPS = 4, 2, 64, 128, 16


def _dense(key, n_in, n_out, scale=1.0):
    w = jax.random.normal(key, (n_in, n_out)) * scale / jnp.sqrt(n_in)
    return {"w": w, "b": jnp.zeros((n_out,))}


def init(key, stacked: bool):
    k = jax.random.split(key, 6)
    heads = {"pi": _dense(k[4], HIDDEN, ACTIONS, 0.01), "v": _dense(k[5], HIDDEN, 1)}
    actor = [_dense(k[0], OBS, HIDDEN), _dense(k[1], HIDDEN, HIDDEN)]
    critic = [_dense(k[2], OBS, HIDDEN), _dense(k[3], HIDDEN, HIDDEN)]
    if not stacked:
        return {"actor": actor, "critic": critic, **heads}
    both = [
        jax.tree.map(lambda a, c: jnp.stack([a, c]), a, c)
        for a, c in zip(actor, critic, strict=True)
    ]
    return {"both": both, **heads}


def stacked_dot(spec: str, x, w, dtype):
    return jnp.einsum(spec, x.astype(dtype), w.astype(dtype), preferred_element_type=jnp.float32)


def forward(params, obs, stacked: bool, dtype):
    def dot(x, w):
        return jnp.matmul(x.astype(dtype), w.astype(dtype), preferred_element_type=jnp.float32)

    if stacked:  # both towers at once: [2, M, H] activations, [2, ...] weights
        l1, l2 = params["both"]
        h = jnp.tanh(stacked_dot("mi,nij->nmj", obs, l1["w"], dtype) + l1["b"][:, None])
        h = jnp.tanh(stacked_dot("nmi,nij->nmj", h, l2["w"], dtype) + l2["b"][:, None])
        ha, hc = h[0], h[1]
    else:
        ha, hc = obs, obs
        for layer in params["actor"]:
            ha = jnp.tanh(dot(ha, layer["w"]) + layer["b"])
        for layer in params["critic"]:
            hc = jnp.tanh(dot(hc, layer["w"]) + layer["b"])
    logits = dot(ha, params["pi"]["w"]) + params["pi"]["b"]
    value = (dot(hc, params["v"]["w"]) + params["v"]["b"])[:, 0]
    return logits, value


def make_epochs(form: str):
    stacked = form == "stack"
    dtype = jnp.bfloat16 if form == "bf16" else jnp.float32
    tx = optax.chain(
        optax.clip_by_global_norm(0.5), optax.scale_by_adam(eps=1e-5), optax.scale(-2.5e-4)
    )

    def loss_fn(params, mb):
        logits, value = forward(params, mb["obs"], stacked, dtype)
        logp_all = jax.nn.log_softmax(logits)
        log_prob = jnp.take_along_axis(logp_all, mb["action"][:, None], axis=1)[:, 0]
        entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1)
        terms = ppo_loss(
            log_prob,
            mb["log_prob"],
            mb["adv"],
            value,
            mb["value"],
            mb["returns"],
            entropy,
            clip_coef=0.2,
            vf_coef=0.5,
            ent_coef=0.01,
            norm_adv=True,
            clip_vloss=True,
        )
        return terms.loss

    def epochs(params, data):
        opt_state = tx.init(params)

        def step(carry, mb):
            params, opt_state = carry
            loss, grads = jax.value_and_grad(loss_fn)(params, mb)
            if form == "gradonly":
                return (params, opt_state), (loss, optax.global_norm(grads))
            updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), (loss, loss)

        (params, _), losses = jax.lax.scan(step, (params, opt_state), data)
        return params, losses

    return epochs, stacked


def make_library_epochs(fused_kernels: str):
    """The library's minibatch gradient (`update.make_minibatch_grads` for CartPole-v1's
    default networks; "on": the fused kernels of `purejaxppo.fused`, "off": XLA's), then
    clip and Adam as `sep`; `params` in the library's layout (`Networks.init`)."""
    import purejaxppo as pjp
    from purejaxppo.envs import make_env
    from purejaxppo.hyperparams import Hyperparams
    from purejaxppo.sequences import Batch
    from purejaxppo.update import make_minibatch_grads

    config = pjp.PPOConfig(fused_kernels=fused_kernels)
    networks = pjp.make_networks(config, *make_env("CartPole-v1"))
    grads_fn = make_minibatch_grads(config, networks)
    hparams = Hyperparams.from_config(config)
    tx = optax.chain(
        optax.clip_by_global_norm(0.5), optax.scale_by_adam(eps=1e-5), optax.scale(-2.5e-4)
    )

    def epochs(params, data):
        opt_state = tx.init(params)

        def step(carry, mb):
            params, opt_state = carry
            steps = {k: v[:, None] for k, v in mb.items()}  # [M] -> [M, L=1]
            batch = Batch(
                obs=steps["obs"],
                action=steps["action"],
                log_prob=steps["log_prob"],
                value=steps["value"],
                advantages=steps["adv"],
                returns=steps["returns"],
                initial_state=(),
                resets=jnp.zeros_like(steps["action"], bool),
            )
            grads, terms = grads_fn(params, batch, hparams, 1.0)
            updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), (terms.loss, terms.loss)

        (params, _), losses = jax.lax.scan(step, (params, opt_state), data)
        return params, losses

    return epochs, networks


def make_data(key, agents: int):
    k = jax.random.split(key, 6)
    shape = (agents, STEPS, MINIBATCH)
    return {
        "obs": jax.random.normal(k[0], (*shape, OBS)),
        "action": jax.random.randint(k[1], shape, 0, ACTIONS),
        "log_prob": jnp.full(shape, jnp.log(0.5)),
        "adv": jax.random.normal(k[2], shape),
        "value": jax.random.normal(k[3], shape),
        "returns": jax.random.normal(k[4], shape),
    }


def time_form(form: str, agents: int, reps: int, interpret: bool = False) -> dict:
    keys = jax.random.split(jax.random.key(0), agents)
    data = make_data(jax.random.key(1), agents)
    if form in ("xla", "fused"):
        mode = "off" if form == "xla" else ("on" if interpret else "auto")
        epochs, networks = make_library_epochs(mode)
        params = jax.vmap(networks.init)(keys)
        run = jax.jit(jax.vmap(epochs))
    else:
        epochs, stacked = make_epochs(form)
        params = jax.vmap(lambda k: init(k, stacked))(keys)
        run = jax.jit(jax.vmap(epochs))
    if form == "bmajor":
        data = jax.tree.map(lambda x: jnp.moveaxis(x, 0, 2), data)  # [STEPS, M, A, ...]
        run = jax.jit(jax.vmap(epochs, in_axes=(0, 2)))
    start = time.perf_counter()
    if form == "highest":
        with jax.default_matmul_precision("highest"):
            compiled = run.lower(params, data).compile()
    else:
        compiled = run.lower(params, data).compile()
    compile_s = time.perf_counter() - start
    jax.block_until_ready(compiled(params, data))
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        jax.block_until_ready(compiled(params, data))
        best = min(best, time.perf_counter() - start)
    out = compiled(params, data)[1][0]
    return {
        "form": form,
        "agents": agents,
        "compile_s": round(compile_s, 2),
        "ms_per_minibatch_step": round(1e3 * best / STEPS, 4),
        "final_loss_mean": float(jnp.mean(out[:, -1])),
    }


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[64])
    parser.add_argument("--forms", nargs="+", default=list(FORMS), choices=FORMS)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--interpret", action="store_true", help="the fused form in Pallas' interpret mode (CPU)"
    )
    args = parser.parse_args(argv)
    rows = []
    print(f"device: {jax.devices()[0].device_kind}; ms per minibatch step, best of {args.reps}")
    for agents in args.agents:
        for form in args.forms:
            try:
                row = time_form(form, agents, args.reps, args.interpret)
            except Exception as error:  # a form that does not compile here: say so, go on
                print(f"{agents:6d} {form:9s} failed: {type(error).__name__}: {error}"[:2000])
                rows.append({"form": form, "agents": agents, "error": repr(error)[:2000]})
                continue
            rows.append(row)
            print(
                f"{agents:6d} {form:9s} compile {row['compile_s']:6.2f} s  "
                f"{row['ms_per_minibatch_step']:9.4f} ms  loss {row['final_loss_mean']:.5f}",
                flush=True,
            )
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
