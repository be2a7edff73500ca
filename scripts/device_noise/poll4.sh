# Wait until driver4.sh is DONE or `limit` seconds pass, print where it stands, pack everything into $OUT.
A=/home/user/aa4; limit=${1:-560}; t0=$SECONDS
while [ $((SECONDS - t0)) -lt "$limit" ] && [ ! -f $A/DONE ]; do sleep 5; done
echo "=== poll ended after $((SECONDS - t0)) s; DONE=$( [ -f $A/DONE ] && echo yes || echo no ); now $(date +%s), started $(cat $A/STARTED)"
echo "=== log"; tail -n 30 $A/log
tail -n 3 $A/build.txt 2>/dev/null | cut -c1-200
for f in $A/*.stderr; do [ -f "$f" ] && { echo "=== $f (tail)"; tail -n 6 "$f" | cut -c1-200; }; done
echo "=== driver.out"; tail -n 10 $A/driver.out
cd $A && tar czf $OUT/aa4.tgz $(ls -d facts.txt log driver.out pip.txt model-*.txt agent-info.txt *.json *.stderr *-logs.tgz dmon.txt 2>/dev/null) 2>/dev/null
tail -c 20000 $A/build.txt > $OUT/build-tail.txt 2>/dev/null; ls -la $OUT
