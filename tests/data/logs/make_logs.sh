#!/usr/bin/env bash
# Regenerates the real logs of tests/data/logs: each is the output of real tools run on this machine
# (pytest, pip, python -X importtime, gcc + make, node, java, bash, git and ls in the zh_CN locale), with
# one line that matters in its middle. Nothing here is copied from elsewhere. Usage: make_logs.sh OUTDIR
set -u
out=$(cd "${1:?OUTDIR}" && pwd); PY=${PY:-python3}
work=$(mktemp -d /tmp/logs.XXXXXX); cd "$work" || exit 1
export PYTHONDONTWRITEBYTECODE=1 NO_COLOR=1 TERM=dumb

# 1. Two test suites in one CI job: the first has one failure, the second passes, verbose.
mkdir -p suite_a suite_b
cat > suite_a/test_orders.py <<'PY'
import pytest
@pytest.mark.parametrize("n", range(120))
def test_order_total(n):
    assert round(n * 1.1, 2) >= n
def test_refund_rounding():
    assert round(2.675, 2) == 2.68
PY
cat > suite_b/test_catalog.py <<'PY'
import pytest
@pytest.mark.parametrize("n", range(180))
def test_catalog_page(n):
    assert len(str(n)) <= 3
PY
{ $PY -m pytest -v -p no:cacheprovider suite_a; $PY -m pytest -v -p no:cacheprovider suite_b; } \
  > "$out/ci_two_suites.log" 2>&1

# 2. Import times, a pip install of a package that does not exist (pip's own config ignored, the index on
#    a closed local port), then import times again.
{ echo "+ python -X importtime -c 'import json, csv'"
  $PY -X importtime -c 'import json, csv'
  echo "+ pip install -v no-such-package-contextmem-demo"
  $PY -m pip install -v --isolated --no-cache-dir --retries 0 --timeout 1 \
    --index-url http://127.0.0.1:9/simple no-such-package-contextmem-demo
  echo "+ python -X importtime -c 'import json, email.mime.multipart, http.client'"
  $PY -X importtime -c 'import json, email.mime.multipart, http.client'; } > "$out/pip_then_importtime.log" 2>&1

# 3. make -k over 160 small C files, one with an error in the middle.
for i in $(seq -w 1 160); do printf 'int f%s(int x) { return x * %d; }\n' "$i" "$((10#$i))" > "f$i.c"; done
printf 'int f077(int x) { return x * undeclared_scale; }\n' > f077.c
printf 'SRCS := $(wildcard f*.c)\nall: $(SRCS:.c=.o)\n%%.o: %%.c\n\tgcc -c -O2 -Wall -o $@ $<\n' > Makefile
make -k -j1 > "$out/make_k.log" 2>&1

# 4. A Python worker logging with the standard library; one item raises, logged with its traceback.
cat > worker.py <<'PY'
import logging
logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
log = logging.getLogger("billing.worker")
for i in range(400):
    try:
        rate = 100 // (i - 217)
        log.info("invoice %d processed, rate %d", i, rate)
    except ZeroDivisionError:
        log.exception("invoice %d failed", i)
PY
$PY worker.py > "$out/python_logging_traceback.log" 2>&1

# 5. A node script: an error's stack printed in the middle of its progress lines.
cat > sync.js <<'JS'
for (let i = 0; i < 400; i++) {
  try {
    if (i === 233) JSON.parse("{bad json");
    console.log(`synced record ${i} of 400`);
  } catch (err) { console.error(err.stack); }
}
JS
node sync.js > "$out/node_stack.log" 2>&1

# 6. Java: an exception's stack trace printed in the middle of a loop.
cat > Batch.java <<'JAVA'
public class Batch {
  public static void main(String[] a) {
    for (int i = 0; i < 400; i++) {
      try {
        if (i == 190) { Object o = null; o.toString(); }
        System.out.println("batch step " + i + " ok");
      } catch (RuntimeException e) { e.printStackTrace(System.out); }
    }
  }
}
JAVA
javac Batch.java 2>/dev/null && java Batch > "$out/java_stack.log" 2>&1

# 7. A job runner whose one job is killed (SIGKILL, as the OOM killer does), and one that segfaults.
printf 'int main(void){ volatile int *p = 0; return *p; }\n' > crash.c && gcc -O0 -o crash crash.c
bash -c 'for i in $(seq 1 300); do
  if [ "$i" = 140 ]; then sleep 5 & kill -9 $!; wait $!; fi
  if [ "$i" = 220 ]; then ./crash; fi
  echo "job $i: done in 0.$((i % 9))s"; done' > "$out/jobs_killed_segfault.log" 2>&1

# 8. Python runs out of memory in the middle of a job log (MemoryError).
bash -c 'for i in $(seq 1 250); do echo "step $i: loaded shard $i"; done
  python3 -c "x = bytearray(1 << 50)"
  for i in $(seq 251 400); do echo "step $i: loaded shard $i"; done' > "$out/python_memoryerror.log" 2>&1

# 9. Chinese: ls and git in the zh_CN locale (glibc's and git's own translations), one path missing.
mkdir -p loc data && localedef -i zh_CN -f UTF-8 loc/zh_CN.UTF-8 2>/dev/null
for i in $(seq -w 1 300); do : > "data/part-$i.csv"; done; rm data/part-151.csv
( export LOCPATH=$work/loc LC_ALL=zh_CN.UTF-8
  for i in $(seq -w 1 300); do ls -l --time-style=+ "data/part-$i.csv"; done
  git -C data status ) > "$out/zh_ls_git.log" 2>&1

# 10. Chinese: an application logging in Chinese (invented), one order failing in the middle.
cat > orders.py <<'PY'
import logging
logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s", level=logging.INFO)
log = logging.getLogger("订单")
for i in range(300):
    if i == 163:
        log.error("订单 %d 支付失败：银行接口返回超时，已重试 3 次", i)
        continue
    log.info("订单 %d 已处理，金额 %d.00 元", i, i * 7 % 500)
PY
$PY orders.py > "$out/zh_app_log.log" 2>&1
rm -rf "$work"
