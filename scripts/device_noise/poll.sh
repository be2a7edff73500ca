A=/home/user/aa; limit=${1:-560}; t0=$SECONDS
while [ $((SECONDS - t0)) -lt "$limit" ] && [ ! -f $A/DONE ]; do sleep 5; done
echo "=== poll ended after $((SECONDS - t0)) s; DONE=$( [ -f $A/DONE ] && echo yes || echo no ); now $(date +%s), started $(cat $A/STARTED)"
echo "=== log"; tail -n 40 $A/log
cat $A/probe.txt 2>/dev/null
for f in $A/*.stderr; do [ -f "$f" ] && { echo "=== $f (tail)"; tail -n 12 "$f" | cut -c1-250; }; done
echo "=== driver.out"; tail -n 10 $A/driver.out
cd $A && tar czf $OUT/aa.tgz $(ls -d facts.txt log driver.out pip.txt model.txt agent-info.txt probe probe.txt campaign-used.json *.json *.stderr dmon.txt home/data 2>/dev/null) 2>/dev/null; ls -la $OUT
