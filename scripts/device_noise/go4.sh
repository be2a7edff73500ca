# First device call (carry .devkit): copy the kit to /home/user/aa4, start driver4.sh detached, then poll.
set -u
A=/home/user/aa4
if [ -f $A/STARTED ]; then echo "driver already started"; else
  mkdir -p $A && rm -rf $A/kit && cp -r .devkit $A/kit && date +%s > $A/STARTED
  setsid nohup bash $A/kit/driver4.sh > $A/driver.out 2>&1 < /dev/null &
  echo "driver started pid $!"
fi
bash $A/kit/poll4.sh "${1:-560}"
