# First device call (carry build/devkit): copy the kit to /home/user/aa3, start the driver detached, then poll.
set -u
A=/home/user/aa3
if [ -f $A/STARTED ]; then echo "driver already started"; else
  mkdir -p $A && rm -rf $A/kit && cp -r build/devkit $A/kit && date +%s > $A/STARTED
  setsid nohup bash $A/kit/driver3.sh > $A/driver.out 2>&1 < /dev/null &
  echo "driver started pid $!"
fi
bash $A/kit/poll3.sh "${1:-560}"
