"""Speed experiments applied from outside the library (purejaxppo/ is not modified).

A variant is a '+'-joined list of tokens, e.g. "u_rollout=8+u_gae=128+cmdbuf":

  base               nothing changed (the library as it is)
  u_rollout=U        `unroll=U` for the rollout scan (purejaxppo/rollout.py)
  u_gae=U            `unroll=U` for the GAE scan (purejaxppo/gae.py); 128 = fully unrolled
  u_mb=U             `unroll=U` for the minibatch scan (purejaxppo/update.py, one_epoch)
  u_epoch=U          `unroll=U` for the epoch scan (purejaxppo/update.py, update_epochs)
  gae=assoc          GAE by `lax.associative_scan` (log2 T parallel steps) instead of a
                     T-step sequential `lax.scan` (`gae_advantages(method="associative")`)
  cmdbuf             XLA GPU command buffers (CUDA graphs) also for while loops and
                     conditionals: --xla_gpu_enable_command_buffer=<defaults>,WHILE,CONDITIONAL
  cmdbuf_unroll      cmdbuf + --xla_gpu_command_buffer_unroll_loops=true
  autotune=N         --xla_gpu_autotune_level=N (0 turns autotuning off: compile time)
  lhs                --xla_gpu_enable_latency_hiding_scheduler=true
  prec=P             jax_default_matmul_precision=P (e.g. "highest", "tensorfloat32", "bfloat16")
  ru=N / eu=N        the "unrolled" layout's rollout / minibatch steps per scan iteration
                     (`purejaxppo.loops.ROLLOUT_UNROLL` / `EPOCH_UNROLL`)
  opt=tree           clipping and Adam on the tree of params (no `optax.flatten`): same math,
                     Adam's state shaped like the params
  opt=leafwise       the same computation, on the library's raveled Adam state (unraveled
                     and raveled back at every step)
  clip=elem          gradients clipped elementwise to +-max_grad_norm (rejax's recipe; other
                     math), Adam on the tree of params
  llvmpar            XLA compiles LLVM modules in parallel threads
                     (--xla_gpu_enable_llvm_module_compilation_parallelism=true; jaxlib
                     0.10.2 knows the flag, 0.11.2 aborts on it as unknown)
  notriton           --xla_gpu_enable_triton_gemm=false (cuBLAS for every matmul: compile time)
  values=loop        the rollout's values computed inside its scan at every step (the
                     "compact" layout's default; the "unrolled" layout's before 2026-11-27);
  values=batched     one critic pass after the scan (the "unrolled" layout's default), in
                     both layouts (`purejaxppo.loops.*_BATCHED_VALUES`)
  nofused            XLA's minibatch gradient, not the fused Pallas kernels that the
                     library takes on a GPU (`purejaxppo.fused`, PPOConfig.fused_kernels).
                     On 2026-11-27 the kernels were measured as the token `fused` before
                     they became the default: results/gpu-fused-20261127.json

`xla_flags(variant)` must be applied to XLA_FLAGS before JAX starts its backend;
`apply(variant)` patches purejaxppo's modules after import and before tracing. The
unroll patches replace the module-level name `jax` in a purejaxppo module by a proxy
whose `lax.scan` passes `unroll=`; every other attribute is the real `jax`.
"""

from __future__ import annotations

import sys
import types

_CMDBUF_DEFAULTS = "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,DYNAMIC_SLICE_FUSION"


def parse(variant: str) -> dict[str, str]:
    tokens = {}
    for token in (variant or "base").split("+"):
        if not token or token == "base":
            continue
        name, _, value = token.partition("=")
        tokens[name] = value
    known = {
        "gae",
        "u_rollout",
        "u_gae",
        "u_mb",
        "u_epoch",
        "cmdbuf",
        "cmdbuf_unroll",
        "autotune",
        "lhs",
        "prec",
        "ru",
        "eu",
        "opt",
        "clip",
        "llvmpar",
        "notriton",
        "nofused",
        "values",
    }
    unknown = set(tokens) - known
    if unknown:
        raise ValueError(f"unknown variant tokens {sorted(unknown)} in {variant!r}")
    return tokens


def xla_flags(variant: str) -> str:
    t = parse(variant)
    flags = []
    if "cmdbuf" in t or "cmdbuf_unroll" in t:
        flags.append(f"--xla_gpu_enable_command_buffer={_CMDBUF_DEFAULTS},WHILE,CONDITIONAL")
    if "cmdbuf_unroll" in t:
        flags.append("--xla_gpu_command_buffer_unroll_loops=true")
    if "autotune" in t:
        flags.append(f"--xla_gpu_autotune_level={int(t['autotune'])}")
    if "lhs" in t:
        flags.append("--xla_gpu_enable_latency_hiding_scheduler=true")
    if "llvmpar" in t:
        flags.append("--xla_gpu_enable_llvm_module_compilation_parallelism=true")
    if "notriton" in t:
        flags.append("--xla_gpu_enable_triton_gemm=false")
    return " ".join(flags)


def set_xla_flags(variant: str, environ) -> None:
    """Adds the variant's XLA flags to `environ["XLA_FLAGS"]` (call before importing jax)."""
    extra = xla_flags(variant)
    if extra:
        environ["XLA_FLAGS"] = (environ.get("XLA_FLAGS", "") + " " + extra).strip()


def _scan_proxy(jax_module, unroll_for):
    """A stand-in for the `jax` module whose `lax.scan` sets `unroll=unroll_for(caller)`."""
    real_scan = jax_module.lax.scan

    def scan(f, init, xs=None, length=None, reverse=False, unroll=1, **kwargs):
        caller = sys._getframe(1).f_code.co_name
        u = unroll_for(caller)
        if u is not None:
            unroll = u
        return real_scan(f, init, xs, length=length, reverse=reverse, unroll=unroll, **kwargs)

    lax = types.SimpleNamespace(
        **{k: getattr(jax_module.lax, k) for k in dir(jax_module.lax) if not k.startswith("__")}
    )
    lax.scan = scan

    class Proxy(types.ModuleType):
        def __getattr__(self, name):
            return getattr(jax_module, name)

    proxy = Proxy("jax_proxy")
    proxy.lax = lax
    return proxy


def apply(variant: str) -> None:
    """Applies the Python-level parts of `variant` (call after importing purejaxppo)."""
    import jax

    t = parse(variant)
    if "prec" in t:
        jax.config.update("jax_default_matmul_precision", t["prec"])

    def int_or_true(v):
        return True if v in ("true", "full") else int(v)

    if "ru" in t or "eu" in t:
        import purejaxppo.loops as loops

        loops.ROLLOUT_UNROLL = int(t.get("ru", loops.ROLLOUT_UNROLL))
        loops.EPOCH_UNROLL = int(t.get("eu", loops.EPOCH_UNROLL))
    if "opt" in t or "clip" in t:
        _patch_optimizer(t.get("opt", "tree"), t.get("clip", "global"))
    if "values" in t:
        import purejaxppo.loops as loops

        if t["values"] not in ("loop", "batched"):
            raise ValueError(f"values={t['values']!r}: must be 'loop' or 'batched'")
        loops.COMPACT_BATCHED_VALUES = loops.UNROLLED_BATCHED_VALUES = t["values"] == "batched"
    if "nofused" in t:
        _patch_no_fused()
    if t.get("gae") == "assoc":
        import purejaxppo.learning as m  # where the update calls gae_advantages
        from purejaxppo.gae import gae_advantages

        def associative(*args, method="scan", **kwargs):
            return gae_advantages(*args, method="associative", **kwargs)

        m.gae_advantages = associative
    elif "gae" in t:
        raise ValueError(f"unknown gae variant {t['gae']!r}")
    if "u_rollout" in t:
        import purejaxppo.rollout as m

        u = int_or_true(t["u_rollout"])
        m.jax = _scan_proxy(jax, lambda caller: u if caller == "rollout" else None)
    if "u_gae" in t:
        import purejaxppo.gae as m

        u = int_or_true(t["u_gae"])
        m.jax = _scan_proxy(jax, lambda caller: u if caller == "gae_advantages" else None)
    if "u_mb" in t or "u_epoch" in t:
        import purejaxppo.update as m

        mapping = {}
        if "u_mb" in t:
            mapping["one_epoch"] = int_or_true(t["u_mb"])
        if "u_epoch" in t:
            mapping["update_epochs"] = int_or_true(t["u_epoch"])
        m.jax = _scan_proxy(jax, mapping.get)


def _patch_no_fused() -> None:
    """XLA's minibatch gradient everywhere: `make_minibatch_grads` (in purejaxppo.update)
    never takes the fused kernels of `purejaxppo.fused`."""
    import purejaxppo.update as update

    update.fused_minibatch_grads = lambda *args, **kwargs: None


def _patch_optimizer(opt: str, clip: str) -> None:
    """Replaces `make_optimizer` (where the update and the init call it) by clipping and
    Adam computed on the tree of params: `clip` "global" (the library's math) or "elem"
    (rejax's); `opt` "tree" (Adam's state shaped like the params) or "leafwise" (the
    library's raveled state, unraveled and raveled back at every step)."""
    import jax
    import optax
    from jax.flatten_util import ravel_pytree

    import purejaxppo.train_setup as setup
    import purejaxppo.update as update

    if opt not in ("tree", "leafwise") or clip not in ("global", "elem"):
        raise ValueError(f"unknown optimizer variant opt={opt!r} clip={clip!r}")
    original = update.make_optimizer

    def on_raveled_state(inner):
        def update_fn(updates, state, params=None):
            flat, unravel = ravel_pytree(updates)

            def is_raveled(x):  # Adam's mu and nu: [P], P the param count
                return x.ndim == 1 and x.shape[0] == flat.shape[0]

            tree_state = jax.tree.map(lambda x: unravel(x) if is_raveled(x) else x, state)
            updates, tree_state = inner.update(updates, tree_state, params)
            state = jax.tree.map(
                lambda old, new: ravel_pytree(new)[0] if is_raveled(old) else new,
                state,
                tree_state,
            )
            return updates, state

        return optax.GradientTransformation(optax.flatten(inner).init, update_fn)

    def make_optimizer(max_grad_norm, learning_rate, adam_eps, labels=None, clip_per_group=False):
        if clip_per_group:
            return original(max_grad_norm, learning_rate, adam_eps, labels, clip_per_group)
        clipper = (
            optax.clip(max_grad_norm)
            if clip == "elem"
            else optax.clip_by_global_norm(max_grad_norm)
        )
        adam = optax.chain(clipper, optax.scale_by_adam(eps=adam_eps))
        if opt == "leafwise":
            adam = on_raveled_state(adam)
        return update._then_steps(adam, learning_rate, labels)

    update.make_optimizer = make_optimizer
    setup.make_optimizer = make_optimizer
