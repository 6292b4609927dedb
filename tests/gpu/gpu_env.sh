# Sourced by the GPU check scripts (after setting $py).
# require_gpu MODULE...: exits 77 (skipped) unless there is an NVIDIA GPU
# and $py imports torch with CUDA and the given modules.
require_gpu() {
	command -v nvidia-smi >/dev/null 2>&1 || { echo "no nvidia-smi: skipping"; exit 77; }
	imports=$(printf ', %s' torch "$@")
	"$py" -c "import sys${imports}; sys.exit(0 if torch.cuda.is_available() else 1)" \
		2>/dev/null || { echo "no CUDA-capable torch $*: skipping"; exit 77; }
}

# clean_ft_env: the checks set their own FT_* variables, nothing inherited.
clean_ft_env() {
	for f in $(env | sed -n 's/^\(FT_[A-Z_]*\)=.*/\1/p'); do unset "$f"; done
	export PYTHONUNBUFFERED=1
}
