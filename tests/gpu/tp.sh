#!/bin/sh
# GPU check of tensor parallelism (see tp.py), on a machine with two GPUs:
# the model split two ways under torchrun (NCCL, NVLink multicast off),
# plain, then under flextensor-run at about half of each rank's decoder
# weights offloaded in both block modes; then the report (all-reduce sums,
# every rank's logits bit for bit, forward time against the per-GPU
# transfer floor, weights on each GPU against its budget).
# Exits 77 with fewer than two GPUs.
# usage: tp.sh <libflextensor.so> <output dir> [share, default 0.5]
set -u
lib=$1 out=$2 share=${3:-0.5}
here=$(CDPATH= cd -- "$(dirname -- "$0")" && pwd)
py=${PYTHON:-python3}
. "$here/gpu_env.sh"
require_gpu
[ "$("$py" -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ] ||
	{ echo "fewer than two GPUs: skipping"; exit 77; }
clean_ft_env
export NCCL_NVLS_ENABLE=0
runner=$(dirname "$lib")/../scripts/flextensor-run
rm -rf "$out"
mkdir -p "$out"
tp() { "$py" -m torch.distributed.run --standalone --nproc-per-node 2 "$here/tp.py" run "$@"; }
tp plain "$out" || exit 1
f=$("$py" "$here/tp.py" fraction "$out" "$share") || exit 1
for m in allocation_block_transfer raw_block_transfer; do
	FT_PROFILING_ITERS=3 FT_LOG_LEVEL=info "$runner" --library "$lib" --mem-fraction "$f" \
		--transfer-mode $m -- "$py" -m torch.distributed.run --standalone \
		--nproc-per-node 2 "$here/tp.py" run "$m" "$out" \
		2>"$out/$m.log" || { echo "$m failed:"; tail -20 "$out/$m.log"; }
	grep -E "plan \(|offloading|error|warn" "$out/$m.log" | head -20 | sed "s/^/  $m: /"
done
"$py" "$here/tp.py" report "$out"
