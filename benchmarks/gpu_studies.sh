#!/usr/bin/env bash
# Chapter 9's and chapter 10's studies side by side on one lent GPU, for SECONDS (default 480),
# from the repository's root on the GPU machine; OUT is the folder that comes back:
#     OUT=/some/folder bash benchmarks/gpu_studies.sh 480
# Chapter 9's planner (honest_study.py) runs 9 jobs at once and starts each one as soon as its learning rate is
# chosen or its teacher is trained; chapter 10's jobs (pretrain_pays.py jobs) run 6 at once through gpu_sweep.py.
# Every job checkpoints each epoch: what is stopped at the deadline resumes here, on the CPU, from its checkpoint.
# Back here: tar xzf each pack (cat PART-* | tar xzf -) in the repository's root, then
#     python benchmarks/honest_study.py plan; python benchmarks/pretrain_pays.py collect --from runs/pretrain_pays
set -u
SECONDS_LEFT=${1:-480}
export PYTHONPATH=$PWD:$PWD/benchmarks PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
nvidia-smi -L
python3 benchmarks/honest_study.py cpu --hours 1 --stop-after "$SECONDS_LEFT" --device cuda --parallel 9 --nice 0 \
    --poll 5 > "$OUT/study44.log" 2>&1 &
STUDY44=$!
python3 benchmarks/gpu_sweep.py --runner benchmarks/pretrain_pays.py --jobs $(python3 benchmarks/pretrain_pays.py jobs --plain) \
    --deadline "$SECONDS_LEFT" --core 0 --device cuda --parallel 6 --poll 10 --save-dir runs/pretrain_pays \
    --pack-dir runs/pretrain_pays_pack > "$OUT/study45.log" 2>&1
wait $STUDY44
python3 benchmarks/honest_study.py plan > "$OUT/plan44.txt"; head -3 "$OUT/plan44.txt"
tail -3 "$OUT/study45.log"
tar czf - benchmarks/results/honest_study runs/honest_study | split -b 15M - "$OUT/study44.tgz.part-"
tar czf - --exclude 'runs/pretrain_pays/ckpt.tar' runs/pretrain_pays | split -b 15M - "$OUT/study45.tgz.part-"
ls -la "$OUT"
