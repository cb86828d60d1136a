#!/usr/bin/env bash
# tests/security/run.sh - the sandbox escape and isolation suite (run as root).
#
# Every case runs the real labbox with a probe inside (tests/security/probe.c) and
# asserts the exact result: an errno name, a value, or a host-side fact.
# Cases that cannot run on this host print "SKIP name -- reason" (tests/lib.sh: only
# the skips in tests/expected-skips.txt are allowed under CI=true).  The last line is
# "N passed, N failed, N skipped"; the exit status is non-zero when anything failed.
# Network cases use only loopback and the namespaces labbox creates.
set -uo pipefail

BUILD=${BUILD:-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/tests/lib.sh"
LABBOX=$ROOT/$BUILD/labbox
PROBE=$ROOT/$BUILD/tests/security/probe
pass=0
fail=0
skipped=0

ok() { pass=$((pass + 1)); echo "PASS $1"; }
ko() { fail=$((fail + 1)); echo "FAIL $1: expected [$2], got [$3]"; [ -s "${LOG:-}" ] && sed 's/^/    /' "$LOG" | tail -5; }
skip() { if skip_verdict sandbox "$1" "$2"; then skipped=$((skipped + 1)); else fail=$((fail + 1)); fi; }
# expect NAME EXPECTED ACTUAL
expect() { if [ "$2" = "$3" ]; then ok "$1"; else ko "$1" "$2" "$3"; return 1; fi; }

# The sandbox library's own cmocka tests: counted per test case, skips as skips.
sandbox_units() {
	local t
	echo "== unit tests (tests/sandbox)"
	CM_PASSED=0 CM_FAILED=0 CM_SKIPPED=0
	for t in "$ROOT/$BUILD"/tests/sandbox/test_*; do
		[ -x "$t" ] || continue
		case "$t" in *.o | *.d) continue ;; esac
		cmocka_run sandbox "$t"
	done
	pass=$((pass + CM_PASSED)) fail=$((fail + CM_FAILED)) skipped=$((skipped + CM_SKIPPED))
}

if [ "$(id -u)" -ne 0 ]; then
	# the cmocka tests need no root (those that do skip, and are counted as skips)
	skip "escape and isolation cases" "needs root"
	sandbox_units
	suite_result sandbox "$pass" "$fail" "$skipped"
	exit
fi
for f in "$LABBOX" "$PROBE"; do
	[ -x "$f" ] || { echo "missing $f (run make tests)"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
done

# /var/tmp is visible (read-only) inside; the state and image dirs below are masked.
WORK=$(mktemp -d /var/tmp/labd-sec.XXXXXX)
chmod 755 "$WORK"
# The probe runs inside sandboxes, whose /tmp is private: a checkout under /tmp
# (CI clones anywhere) would hide it, so run a copy from the visible work dir.
cp "$PROBE" "$WORK/probe" && PROBE=$WORK/probe
STATE=$WORK/state
HOMES=$WORK/homes
CGP=labd-test-$$
LOG=$WORK/log
LISTENER=
cleanup() {
	[ -n "$LISTENER" ] && kill "$LISTENER" 2>/dev/null
	jobs -p | xargs -r kill -9 2>/dev/null
	wait 2>/dev/null
	"$LABBOX" gc --all --state-dir "$STATE" >/dev/null 2>&1
	grep -o " $WORK[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null
	for img in "$HOMES"/*.img; do
		[ -e "$img" ] && losetup -j "$img" | cut -d: -f1 | xargs -r -n1 losetup -d 2>/dev/null
	done
	for c in /sys/fs/cgroup/*/"$CGP" /sys/fs/cgroup/"$CGP"; do
		[ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# box USER ID [labbox options] -- CMD: one sandbox with the suite's state and cgroups
box() {
	local user=$1 id=$2
	shift 2
	"$LABBOX" run --user "$user" --user-id "$id" --uid-base 200000 --state-dir "$STATE" \
		--cgroup-parent "$CGP" "$@" 2>"$LOG"
}
# probe CASE [ARG]: the probe in a default sandbox (no home)
probe() { box alice 7 -- "$PROBE" "$@"; }
squash() { tr -s ' \t\n' ' ' | sed 's/^ //; s/ $//'; }

echo "== syscall surface (seccomp, capabilities, user namespace)"
for c in mount umount pivot_root chroot unshare-user unshare-mnt clone-newuser setns ptrace-init \
	bpf keyctl add_key perf_event_open init_module finit_module kexec_load userfaultfd \
	io_uring_setup open_by_handle_at tiocsti af_alg af_vsock; do
	expect "$c denied" EPERM "$(probe "$c")"
done
expect "clone3 answered ENOSYS (libc falls back to clone)" ENOSYS "$(probe clone3)"
expect "i386 int 0x80 kills (native arch only)" SYS "$(probe int80)"
expect "mknod of a device denied" EPERM "$(probe mknod /tmp/null2)"
for c in ptrace-child memfd_create pidfd_open; do
	expect "$c allowed (profilers, CUDA, NCCL)" OK "$(probe "$c")"
done
expect "CapEff is 0" 0000000000000000 "$(probe status CapEff)"
expect "CapBnd is 0" 0000000000000000 "$(probe status CapBnd)"
expect "NoNewPrivs set" 1 "$(probe status NoNewPrivs)"
expect "seccomp filter mode" 2 "$(probe status Seccomp)"
expect "uid map: inner 1000 is host 200007 only" "1000 200007 1" "$(box alice 7 -- cat /proc/self/uid_map | squash)"
expect "setuid(0) impossible (root unmapped)" EINVAL "$(probe setuid0)"
cp "$PROBE" "$WORK/suid-probe" && chown root:root "$WORK/suid-probe" && chmod 4755 "$WORK/suid-probe"
expect "setuid-root binary gives no privilege" 1000 "$(box alice 7 -- "$WORK/suid-probe" euid)"

echo "== namespaces and filesystem"
expect "only the sandbox's pids visible" "1 2" "$(probe pids)"
expect "hostname is the user name" alice "$(probe hostname)"
expect "/etc/shadow masked" "OK 0" "$(probe read /etc/shadow)"
expect "/root unreadable" EACCES "$(probe open /root)"
expect "labd state dir unreadable" EACCES "$(probe stat "$STATE/sandboxes")"
expect "/proc/sys not writable" EACCES "$(probe write /proc/sys/kernel/core_pattern)"
expect "/sys read-only" EROFS "$(probe write /sys/kernel/uevent_helper)"
expect "no cgroup release_agent (CVE-2022-0492)" EACCES "$(probe write /sys/fs/cgroup/release_agent)"
expect "no cgroup mkdir" EACCES "$(probe mkdir /sys/fs/cgroup/x)"
expect "root file system read-only" EROFS "$(probe write /etc/labd-test)"
expect "host block devices absent" ENOENT "$(probe stat /dev/"$(ls /sys/block | grep -v -E '^(loop|ram|zram)' | head -1)")"
expect "/dev is the minimal set" "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero" \
	"$(box alice 7 -- ls /dev | squash)"
exec 7</etc/hostname 8>"$WORK/leak"
expect "no inherited fds (CVE-2024-21626)" "0 1 2" "$(probe fds)"
exec 7<&- 8>&-
sum_before=$(sha256sum <"$LABBOX")
expect "/proc/1/exe not writable (CVE-2019-5736)" EACCES "$(probe openrw /proc/1/exe)"
expect "host labbox binary unchanged" "$sum_before" "$(sha256sum <"$LABBOX")"
expect "/tmp size-limited" "ENOSPC 8" "$(box alice 7 --tmp 8M -- "$PROBE" fill /tmp/f)"
# only this suite's paths: other processes on the host may mount meanwhile
before=$(grep -c -e "$WORK" -e " / / " /proc/self/mountinfo)
box alice 7 -- sleep 1 &
sleep 0.5
during=$(grep -c -e "$WORK" -e " / / " /proc/self/mountinfo)
wait
expect "no sandbox mount propagates to the host" "$before" "$during"

echo "== network"
port=$((20000 + RANDOM % 20000))
python3 -c "import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $port)); s.listen(8); time.sleep(120)" &
LISTENER=$!
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
if (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; then
	expect "host 127.0.0.1 listener unreachable" ECONNREFUSED "$(probe connect $port)"
else
	ko "host 127.0.0.1 listener unreachable" "listener up" "host listener did not start"
fi
kill "$LISTENER" 2>/dev/null
LISTENER=
expect "only loopback inside" lo "$(box alice 7 -- ls /sys/class/net | squash)"

echo "== resources"
hostlat=$WORK/hostlat
box alice 7 --pids 64 -- "$PROBE" forkbomb 2 >"$WORK/bomb" &
sleep 0.8
t0=$(date +%s%N)
/bin/true
t1=$(date +%s%N)
echo $(((t1 - t0) / 1000000)) >"$hostlat"
wait
read -r berr bcount <"$WORK/bomb" || true
if [ "${berr:-}" = EAGAIN ] && [ "${bcount:-99}" -lt 64 ] && [ "$(cat "$hostlat")" -lt 1000 ]; then
	ok "fork bomb stops at pids limit ($bcount forks, host answered in $(cat "$hostlat") ms)"
else
	ko "fork bomb stops at pids limit" "EAGAIN <64, host <1000 ms" "$(cat "$WORK/bomb") host $(cat "$hostlat") ms"
fi
box alice 7 --mem 64M -- "$PROBE" memhog
rc=$?
if [ $rc -eq 137 ] && grep -q "OOM killer" "$LOG"; then
	ok "memory hog OOM-killed and reported as OOM"
else
	ko "memory hog OOM-killed and reported as OOM" "137 + OOM message" "$rc $(cat "$LOG")"
fi
pct=$(box alice 7 --cpus 0.5 -- "$PROBE" cpuhog 2)
if [ -n "$pct" ] && [ "$pct" -ge 30 ] && [ "$pct" -le 60 ]; then
	ok "cpu hog held to its 0.5 CPU quota (${pct}% of one CPU)"
else
	ko "cpu hog held to its 0.5 CPU quota" "30..60%" "${pct}%"
fi

echo "== homes"
A=$HOMES/alice.img
B=$HOMES/bob.img
home_a() { box alice 7 --home-image "$A" --home-size 32M "$@"; }
home_b() { box bob 8 --home-image "$B" --home-size 32M "$@"; }
cat >"$WORK/evil.c" <<EOF
#include <fcntl.h>
__attribute__((constructor)) static void evil(void) { open("$WORK/marker", O_CREAT | O_WRONLY, 0644); }
EOF
cc -shared -fPIC -o "$WORK/evil.so" "$WORK/evil.c"
# first use: mkfs.ext4 runs on the host while the user's environment asks for LD_PRELOAD
home_a --env LD_PRELOAD="$WORK/evil.so" -- sh -c 'echo persist-42 > $HOME/p'
expect "user LD_PRELOAD reaches no host helper" absent "$([ -e "$WORK/marker" ] && echo present || echo absent)"
expect "home persists across sandboxes" persist-42 "$(home_a -- cat /home/alice/p)"
home_a -- "$PROBE" write /home/alice/owned >/dev/null
expect "home files owned by the mapped host uid" 200007 \
	"$(debugfs -R 'stat /owned' "$A" 2>/dev/null | sed -n 's/.*User: *\([0-9]*\).*/\1/p')"
expect "HOME set and is the cwd" "/home/alice /home/alice" "$(home_a -- sh -c 'echo $HOME $(pwd)')"
home_b -- true
expect "other users' homes absent" alice "$(home_a -- ls /home | squash)"
expect "home images unreachable" EACCES "$(home_a -- "$PROBE" stat "$B")"
out=$(home_a -- "$PROBE" fill /home/alice/big)
err=${out% *}
mib=${out#* }
if [ "$err" = ENOSPC ] && [ "$mib" -ge 20 ] && [ "$mib" -le 32 ]; then
	ok "filling the home gives ENOSPC at its size ($mib MiB)"
else
	ko "filling the home gives ENOSPC at its size" "ENOSPC 20..32" "$out"
fi
expect "another user's home unaffected" OK "$(home_b -- "$PROBE" write /home/bob/x)"
home_a -- rm -f /home/alice/big
usage=$("$LABBOX" home usage --user alice --home-image "$A" --state-dir "$STATE")
case "$usage" in size=[1-9]*) ok "usage readable from the host ($usage)" ;; *) ko "usage readable from the host" "size=..." "$usage" ;; esac
# online growth needs CAP_SYS_RESOURCE (EXT4_IOC_RESIZE_FS); some VMs withhold it
if [ $((0x$(sed -n 's/^CapEff:\t//p' /proc/self/status) >> 24 & 1)) -eq 1 ]; then
	home_a -- sh -c 'sleep 1.5; df -B1 --output=size /home/alice | tail -1' >"$WORK/grow" &
	sleep 0.7
	"$LABBOX" home grow --user alice --home-image "$A" --state-dir "$STATE" --size 48M 2>"$LOG"
	wait
	size_after=$(tr -d ' ' <"$WORK/grow")
	if [ -n "$size_after" ] && [ "$size_after" -gt $((36 << 20)) ]; then
		ok "home grown online while mounted ($size_after bytes)"
	else
		ko "home grown online while mounted" ">36 MiB" "$size_after"
	fi
else
	skip "home grown online while mounted" "this host withholds CAP_SYS_RESOURCE from root"
	"$LABBOX" home grow --user alice --home-image "$A" --state-dir "$STATE" --size 48M 2>"$LOG"
	size_after=$(home_a -- df -B1 --output=size /home/alice | tail -1 | tr -d ' ')
	if [ -n "$size_after" ] && [ "$size_after" -gt $((36 << 20)) ]; then
		ok "home grown offline ($size_after bytes)"
	else
		ko "home grown offline" ">36 MiB" "$size_after"
	fi
fi

# A sandbox started while another user's home is mounted carries a (masked) copy
# of that mount, which keeps the loop device attached after the home unmounts.
# Mounting the home again must reuse that device: a second loop device on the
# same image would be a second ext4 instance on one file, which corrupts it.
home_a -- sh -c 'echo copy-check > $HOME/c; sleep 2' &
homepid=$!
sleep 0.8
box bob 8 -- sleep 5 &
bobpid=$!
wait "$homepid"
home_a -- sh -c 'cat $HOME/c; echo again >> $HOME/c; sleep 1' >"$WORK/again" &
againpid=$!
sleep 0.5
devices=$(losetup -j "$A" | wc -l)
wait "$againpid" "$bobpid"
expect "a home is never attached to two loop devices" "copy-check 1" "$(squash <"$WORK/again") $devices"
expect "home intact after a neighbour's sandbox" "copy-check again" "$(home_a -- cat /home/alice/c | squash)"

# symlinks planted in the user-writable run dir must not steer host-side teardown
mkdir -p "$WORK/victim" && echo keep >"$WORK/victim/file"
box alice 7 --run-dir "$WORK/run-alice" -- sh -c \
	"ln -s $WORK/victim /run/labd/dir; ln -s $WORK/victim/file /run/labd/file; mkdir /run/labd/d; ln -s / /run/labd/d/root"
expect "planted symlinks leave host files alone" "keep gone" \
	"$(cat "$WORK/victim/file") $([ -e "$WORK/run-alice" ] && echo left || echo gone)"

echo "== signals"
# The labd supervisor blocks SIGTERM (for its signalfd) when it starts sandboxes:
# the command must still get a fresh mask, and init (pid 1, which the kernel
# shields from SIG_DFL signals sent from outside) must forward SIGTERM to it.
# The command is python, not sh: dash clears its signal mask at start.
python3 -c 'import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGCHLD})
os.execv(sys.argv[1], sys.argv[1:])' "$LABBOX" run --user alice --user-id 7 --uid-base 200000 \
	--state-dir "$STATE" --cgroup-parent "$CGP" -- \
	python3 -c 'import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: (print("got-term", flush=True), sys.exit(0)))
print("ready", flush=True)
time.sleep(30)' \
	>"$WORK/term.out" 2>"$LOG" &
termbox=$!
for _ in $(seq 50); do grep -q ready "$WORK/term.out" 2>/dev/null && break; sleep 0.1; done
init=$(pgrep -P "$termbox" | head -1)
[ -n "$init" ] && kill -TERM "$init"
for _ in $(seq 30); do grep -q got-term "$WORK/term.out" && break; sleep 0.1; done
expect "SIGTERM to init reaches the command (even if the caller blocked it)" "ready got-term" \
	"$(squash <"$WORK/term.out")"
kill -9 "$termbox" 2>/dev/null
wait "$termbox" 2>/dev/null

echo "== crash and teardown"
(exec "$LABBOX" run --user alice --user-id 7 --uid-base 200000 --state-dir "$STATE" --cgroup-parent "$CGP" \
	--home-image "$A" -- sh -c 'while :; do dd if=/dev/zero of=$HOME/w bs=64k count=32 conv=fsync 2>/dev/null; done' \
	2>/dev/null) &
lb=$!
sleep 1
kill -9 "$lb"
wait "$lb" 2>/dev/null
sleep 0.3
left=$(cat /sys/fs/cgroup/pids/"$CGP"/*/cgroup.procs /sys/fs/cgroup/"$CGP"/*/cgroup.procs 2>/dev/null | wc -l)
expect "labbox SIGKILLed: no sandbox process survives" 0 "$left"
"$LABBOX" gc --state-dir "$STATE" >/dev/null 2>"$LOG"
expect "home fsck clean after SIGKILL mid-write" 0 "$("$LABBOX" home fsck --user alice --home-image "$A" 2>"$LOG"; echo $?)"
expect "home mounts again after the crash" persist-42 "$(home_a -- cat /home/alice/p)"
leaks=$(
	grep -c " $WORK" /proc/self/mountinfo
	losetup -j "$A" | wc -l
	ls -d /sys/fs/cgroup/*/"$CGP"/*/ /sys/fs/cgroup/"$CGP"/*/ 2>/dev/null | wc -l
	ls "$STATE/sandboxes" 2>/dev/null | wc -l
)
expect "no leaked mounts, loop devices, cgroups or state" "0 0 0 0" "$(echo $leaks)"

echo "== GPU passthrough with stand-in devices"
if [ -d /sys/fs/cgroup/devices ] || [ -e /sys/fs/cgroup/cgroup.controllers ]; then
	G=$WORK/gpudev
	mkdir -p "$G"
	mknod "$G/nvidia0" c 195 0 && mknod "$G/nvidia1" c 195 1 && mknod "$G/nvidiactl" c 195 255 &&
		mknod "$G/nvidia-modeset" c 195 254 && mknod "$G/nvidia-uvm" c 235 0
	gpu() { box alice 7 --gpu 1 --dev-prefix "$G" "$@"; }
	expect "only the allotted GPU nodes inside" "nvidia-uvm nvidia1 nvidiactl" "$(gpu -- sh -c 'ls /dev | grep nvidia' | squash)"
	expect "allotted GPU passes the device cgroup" ENXIO "$(gpu -- "$PROBE" open /dev/nvidia1)"
	expect "CUDA_VISIBLE_DEVICES set" 1 "$(gpu -- sh -c 'echo $CUDA_VISIBLE_DEVICES')"
	# make nvidia0 appear inside: join the sandbox's device cgroup from the host and
	# open the stand-in node directly
	gpu -- sleep 2 &
	sleep 0.7
	cg=$(grep -l "^c 195:1 rw" /sys/fs/cgroup/devices/"$CGP"/*/devices.list 2>/dev/null | head -1)
	cg=${cg%devices.list}
	if [ -n "$cg" ]; then
		r0=$(sh -c "echo \$\$ > ${cg}cgroup.procs && exec $PROBE open $G/nvidia0")
		r1=$(sh -c "echo \$\$ > ${cg}cgroup.procs && exec $PROBE open $G/nvidia1")
		expect "other GPU denied by the device cgroup even if it appears" "EPERM ENXIO" "$r0 $r1"
	else
		ko "other GPU denied by the device cgroup even if it appears" "a cgroup" "none found"
	fi
	wait
else
	skip "GPU device cgroup" "no devices controller"
fi

sandbox_units

suite_result sandbox "$pass" "$fail" "$skipped"
