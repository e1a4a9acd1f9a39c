"""Capture a small JAX/optax training loop (flax Conv 32, Conv 32 stride 2, Dense
``big`` 8192->512, Dense ``head`` 10; Adam; batch 32 of 32x32x3) with JAX's own
profiler and its Python tracer (``python_tracer_level=1``, JAX's source record):
one warm-up step compiles ``train_step``, then 3 steps under
``StepTraceAnnotation``. Made with JAX 0.10.2, flax 0.12.8, optax 0.2.8 on CPU
in a virtualenv of its own (JAX is no dependency of traceparse):

    /tmp/jaxvenv/bin/python benchmarks/make_jax_optax.py OUT
    python benchmarks/jax_optax_roles.py OUT --events

It made ``fixtures/jax_optax_cpu``.
"""

import sys
from pathlib import Path

import flax.linen as nn
import jax
import optax


class Net(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Conv(32, (3, 3), name="conv1")(x)
        x = nn.relu(x)
        x = nn.Conv(32, (3, 3), strides=(2, 2), name="conv2")(x)
        x = nn.relu(x)
        x = x.reshape((x.shape[0], -1))
        x = nn.Dense(512, name="big")(x)
        x = nn.relu(x)
        return nn.Dense(10, name="head")(x)


out = Path(sys.argv[1])
model = Net()
key = jax.random.PRNGKey(0)
images = jax.random.normal(key, (32, 32, 32, 3))
labels = jax.random.randint(key, (32,), 0, 10)
params = model.init(key, images)
tx = optax.adam(1e-3)
opt_state = tx.init(params)


@jax.jit
def train_step(params, opt_state, images, labels):
    def loss_fn(p):
        logits = model.apply(p, images)
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, loss


params, opt_state, loss = train_step(params, opt_state, images, labels)
loss.block_until_ready()
opts = jax.profiler.ProfileOptions()
opts.python_tracer_level = 1
opts.host_tracer_level = 2
jax.profiler.start_trace(str(out), profiler_options=opts)
for n in range(3):
    with jax.profiler.StepTraceAnnotation("train", step_num=n):
        params, opt_state, loss = train_step(params, opt_state, images, labels)
        loss.block_until_ready()
jax.profiler.stop_trace()
print("loss", float(loss))
