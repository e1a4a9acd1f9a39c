"""GPU captures for issues 47 and 50, made in one call on a lent GPU.

The scenarios are fixed here before any capture of them exists, and split
before any prediction is measured on them:

- **jax_cnn** (development set): a flax CNN (Conv 32, Conv 64, max pool, Conv
  128, max pool, Dense 256, Dense 10 over 64x64x3 images), float32, optax Adam,
  one ``jax.jit`` training step, at batch 32, 64 and 128.
- **keras_cnn** (test set: held out, run to report): the same layers as a
  Keras 3 ``Sequential`` on Keras' JAX backend, trained with ``fit`` at its
  default ``jit_compile`` (XLA on a GPU), at batch 32, 64 and 128. Needs the
  Keras wheels carried (``--keras`` says where; without them it is skipped and
  the manifest says so).
- **What-ifs of jax_cnn at 64** (issue 50, development set): ``optax.sgd``
  instead of Adam (``sgd``), the forward pass in bfloat16 with float32 master
  weights (``bf16``), each convolution block under ``jax.checkpoint``
  (``remat``).

Each capture is one fresh process (JAX's allocator starts empty, as a user's
run does): it builds the model, compiles the step and runs two warm-up steps
outside the trace, then traces three steps under ``StepTraceAnnotation``, each
step's batch put on the device inside the trace (the step's inputs are then in
the capture, as a user's data pipeline puts them). Runs go round-robin (every
scenario's first run before any second run), so a budget cut short still
leaves every scenario captured once.

On the device (its image has JAX, flax and optax, but no TensorFlow, which is
too large to carry), from the repository root:

    python3 benchmarks/gpu_capture.py --out "$OUT" --budget 420

It writes to ``--out`` one archive per family (``jax_cnn.tar.gz``,
``keras_cnn.tar.gz``, ``whatif.tar.gz``; one per batch size where a family's
would pass the device tool's 16 MiB a file), each holding its captures under
``<scenario>_<batch>_r<run>/plugins/profile/...``, and ``MANIFEST.json``
(scenario, set, batch, run, seconds, JAX version, device, and the error of any
run that failed). The captures themselves are made under ``--work`` (a
temporary folder), so ``--out`` holds only what comes back. ``--plan`` lists
the runs without running them; ``--scenarios``, ``--batches`` and ``--runs``
narrow them (on a CPU, to check the script: JAX's CPU client records no
allocations, so those captures have no memory timeline). docs/predict.md,
"When a GPU is lent", says how the captures become fixtures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

BATCHES = (32, 64, 128)
RUNS = 3  # fresh processes per scenario and batch size
WHATIF_BATCH = 64
WHATIF_RUNS = 2
IMAGE = (64, 64, 3)
CLASSES = 10
WARMUP, TRACED = 2, 3
FILE_LIMIT = 15 * 2**20  # what the device tool brings back: 16 MiB a file


def family(scenario: str) -> str:
    """The archive a scenario's captures go to."""
    return scenario if scenario in ("jax_cnn", "keras_cnn") else "whatif"


@dataclass(frozen=True)
class Run:
    """One capture: a scenario at a batch size, the ``run``-th fresh process."""

    scenario: str
    split: str  # "dev" or "test"
    batch: int
    run: int
    change: str = ""  # a what-if's change of jax_cnn: sgd, bf16 or remat

    @property
    def name(self) -> str:
        return f"{self.scenario}_{self.batch}_r{self.run}"


def plan(runs: int = RUNS, whatif_runs: int = WHATIF_RUNS) -> list[Run]:
    """Every run, round-robin: all first runs, then all second runs, and so on."""
    by_index: list[list[Run]] = []
    for r in range(max(runs, whatif_runs)):
        this: list[Run] = []
        if r < runs:
            this += [Run("jax_cnn", "dev", b, r) for b in BATCHES]
            this += [Run("keras_cnn", "test", b, r) for b in BATCHES]
        if r < whatif_runs:
            this += [
                Run(f"jax_cnn_{c}", "dev", WHATIF_BATCH, r, change=c)
                for c in ("sgd", "bf16", "remat")
            ]
        by_index.append(this)
    return [run for this in by_index for run in this]


# ---- the programs (run in the child process) -------------------------------------


def _batches(batch: int, count: int, seed: int):  # type: ignore[no-untyped-def]
    import numpy as np

    rng = np.random.default_rng(seed)
    for _ in range(count):
        images = rng.standard_normal((batch, *IMAGE), dtype=np.float32)
        labels = rng.integers(0, CLASSES, size=(batch,), dtype=np.int32)
        yield images, labels


def _trace(directory: Path):  # type: ignore[no-untyped-def]
    import jax

    options = jax.profiler.ProfileOptions()
    wanted = {
        "python_tracer_level": 0,  # JAX's Python frames: not needed, and large
        "host_tracer_level": 2,  # the allocator's MemoryAllocation events
        "enable_hlo_proto": True,  # the programs' buffer assignments (docs/xla.md)
    }
    for name, value in wanted.items():  # a JAX without one keeps its default
        if hasattr(options, name):
            setattr(options, name, value)
    jax.profiler.start_trace(str(directory), profiler_options=options)


def run_jax(batch: int, change: str, out: Path) -> None:
    """The flax CNN's training step: warm-up outside the trace, three steps in it."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax

    compute = jnp.bfloat16 if change == "bf16" else jnp.float32

    class Block(nn.Module):
        features: int
        pool: bool

        @nn.compact
        def __call__(self, x):  # type: ignore[no-untyped-def]
            x = nn.relu(nn.Conv(self.features, (3, 3), dtype=compute, name="conv")(x))
            return nn.max_pool(x, (2, 2), strides=(2, 2)) if self.pool else x

    block = nn.checkpoint(Block) if change == "remat" else Block

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x):  # type: ignore[no-untyped-def]
            x = block(32, False, name="block1")(x)
            x = block(64, True, name="block2")(x)
            x = block(128, True, name="block3")(x)
            x = x.reshape((x.shape[0], -1))
            x = nn.relu(nn.Dense(256, dtype=compute, name="hidden")(x))
            return nn.Dense(CLASSES, dtype=jnp.float32, name="head")(x)

    model = Net()
    tx = optax.sgd(1e-2) if change == "sgd" else optax.adam(1e-3)
    params = model.init(jax.random.PRNGKey(0), jnp.zeros((1, *IMAGE), jnp.float32))
    opt_state = tx.init(params)

    @jax.jit
    def train_step(params, opt_state, images, labels):  # type: ignore[no-untyped-def]
        def loss_fn(p):  # type: ignore[no-untyped-def]
            logits = model.apply(p, images.astype(compute))
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    data = _batches(batch, WARMUP + TRACED, seed=batch)
    for _ in range(WARMUP):
        images, labels = next(data)
        params, opt_state, loss = train_step(params, opt_state, images, labels)
    loss.block_until_ready()
    _trace(out)
    for step in range(TRACED):
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            images, labels = next(data)
            images, labels = jax.device_put(images), jax.device_put(labels)
            params, opt_state, loss = train_step(params, opt_state, images, labels)
            loss.block_until_ready()
    jax.profiler.stop_trace()


def run_keras(batch: int, out: Path) -> None:
    """The same layers in Keras 3 on its JAX backend, ``fit`` at its default
    ``jit_compile``: one epoch of warm-up steps outside the trace, then one of
    three steps in it (``fit`` keeps its compiled train function between calls)."""
    import numpy as np

    os.environ["KERAS_BACKEND"] = "jax"
    import jax
    import keras

    model = keras.Sequential(
        [
            keras.Input(IMAGE),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu", name="conv1"),
            keras.layers.Conv2D(64, 3, padding="same", activation="relu", name="conv2"),
            keras.layers.MaxPooling2D(2, name="pool2"),
            keras.layers.Conv2D(128, 3, padding="same", activation="relu", name="conv3"),
            keras.layers.MaxPooling2D(2, name="pool3"),
            keras.layers.Flatten(name="flatten"),
            keras.layers.Dense(256, activation="relu", name="hidden"),
            keras.layers.Dense(CLASSES, name="head"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    warm = list(_batches(batch, WARMUP, seed=batch))
    traced = list(_batches(batch, TRACED, seed=batch + 1))

    def stacked(pairs):  # type: ignore[no-untyped-def]
        return np.concatenate([i for i, _ in pairs]), np.concatenate([lab for _, lab in pairs])

    x, y = stacked(warm)
    model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
    x, y = stacked(traced)
    _trace(out)
    model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
    jax.profiler.stop_trace()


def child(run: Run, out: Path) -> None:
    if run.scenario == "keras_cnn":
        run_keras(run.batch, out)
    else:
        run_jax(run.batch, run.change, out)


# ---- the driver -------------------------------------------------------------------


def device() -> str:
    try:
        import jax

        d = jax.devices()[0]
        return f"{d.platform}: {getattr(d, 'device_kind', d)}; jax {jax.__version__}"
    except Exception as exc:  # the manifest says what failed
        return f"unknown ({exc})"


def keras_available(env: dict[str, str]) -> str:
    """Empty when Keras 3 imports on its JAX backend, else why not."""
    probe = [sys.executable, "-c", "import keras; print(keras.__version__)"]
    done = subprocess.run(probe, env=env, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return ""
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def pack(captures: Path, done: list[dict[str, object]], out: Path) -> list[str]:
    """One archive per family of the captured runs, split by batch size where one
    would be too large to come back; returns the archives' names."""
    groups: dict[str, list[dict[str, object]]] = {}
    for record in done:
        groups.setdefault(family(str(record["scenario"])), []).append(record)
    written: list[str] = []

    def write(name: str, runs: list[dict[str, object]]) -> Path:
        path = out / name
        with tarfile.open(path, "w:gz", compresslevel=9) as tar:
            for run in runs:
                tar.add(captures / str(run["name"]), arcname=str(run["name"]))
        return path

    for name, runs in groups.items():
        path = write(f"{name}.tar.gz", runs)
        if path.stat().st_size <= FILE_LIMIT:
            written.append(path.name)
            continue
        path.unlink()
        for batch in sorted({int(str(run["batch"])) for run in runs}):
            part = [run for run in runs if run["batch"] == batch]
            written.append(write(f"{name}_{batch}.tar.gz", part).name)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where the archives and manifest go")
    parser.add_argument("--work", type=Path, help="where the captures are made (a temp dir)")
    parser.add_argument("--budget", type=float, default=420, help="seconds for all runs")
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--whatif-runs", type=int, default=WHATIF_RUNS)
    parser.add_argument("--scenarios", help="comma-separated scenario names to keep")
    parser.add_argument("--batches", help="comma-separated batch sizes to keep")
    parser.add_argument("--plan", action="store_true", help="list the runs and stop")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:  # one capture, in this fresh process
        run = Run(**json.loads(args.child))
        child(run, args.out)
        return 0

    runs = plan(args.runs, args.whatif_runs)
    if args.scenarios:
        keep = set(args.scenarios.split(","))
        runs = [r for r in runs if r.scenario in keep]
    if args.batches:
        sizes = {int(b) for b in args.batches.split(",")}
        runs = [r for r in runs if r.batch in sizes]
    if args.plan or args.out is None:
        for r in runs:
            print(r.name, r.split, r.change or "-")
        return 0

    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONUNBUFFERED": "1"}
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "true")  # JAX's default, stated
    no_keras = keras_available(env)
    args.out.mkdir(parents=True, exist_ok=True)
    captures = args.work or Path(tempfile.mkdtemp(prefix="gpu_captures_"))
    captures.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, object] = {
        "script": "benchmarks/gpu_capture.py",
        "device": device(),
        "python": platform.python_version(),
        "keras": no_keras or "available",
    }
    records: list[dict[str, object]] = []
    deadline = time.monotonic() + args.budget
    for run in runs:
        record: dict[str, object] = asdict(run) | {"name": run.name}
        if run.scenario == "keras_cnn" and no_keras:
            records.append(record | {"status": f"skipped: Keras not importable ({no_keras})"})
            continue
        left = deadline - time.monotonic()
        if left < 20:
            records.append(record | {"status": "skipped: out of budget"})
            continue
        start = time.monotonic()
        command = [
            sys.executable, __file__, "--out", str(captures / run.name),
            "--child", json.dumps(asdict(run)),
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=left, check=False
            )
            status = "ok" if done.returncode == 0 else f"failed: {done.stderr[-2000:]}"
        except subprocess.TimeoutExpired:
            status = "failed: out of budget mid-run"
        records.append(record | {"status": status, "seconds": round(time.monotonic() - start)})
        print(run.name, status.splitlines()[0] if status else status, flush=True)
    manifest["runs"] = records
    archives = pack(captures, [r for r in records if r.get("status") == "ok"], args.out)
    manifest["archives"] = archives
    (args.out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    ok = sum(r.get("status") == "ok" for r in records)
    print(f"{ok} of {len(records)} runs captured; archives: {', '.join(archives)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
