#!/usr/bin/env bash
# tests/security/run.sh - the sandbox escape and isolation suite (run as root).
#
# Every case runs the real labbox with a probe inside (tests/security/probe.c) and
# asserts the exact result: an errno name, a value, or a host-side fact.  Where a
# missing capability or a plain file permission would give the same result as the
# defence, a positive control ("control ..." cases) runs the same probe with that
# defence off, as host root outside the sandbox, or against a permissive target, and
# asserts that it gets through there: the case then tells the defence from coincidence.
# Cases that cannot run on this host print "SKIP name -- reason" (tests/lib.sh: only
# the skips in tests/expected-skips.txt are allowed under CI=true).  The last line is
# "N passed, N failed, N skipped"; the exit status is non-zero when anything failed.
# Waits poll with deadlines (wait_until), sandboxes hold on FIFO gates, never sleeps.
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
# expect_re NAME REGEX ACTUAL: ACTUAL matches REGEX as a whole (alternatives: A|B)
expect_re() { if [[ $3 =~ ^($2)$ ]]; then ok "$1 ($3)"; else ko "$1" "$2" "$3"; fi; }

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

# /var/lib is visible (read-only) inside (/var/tmp is hidden); the state and image dirs
# below are masked.
WORK=$(mktemp -d /var/lib/labd-sec.XXXXXX)
chmod 755 "$WORK"
# The probe runs inside sandboxes, whose /tmp is private: a checkout under /tmp
# (CI clones anywhere) would hide it, so run a copy from the visible work dir.
cp "$PROBE" "$WORK/probe" && PROBE=$WORK/probe
STATE=$WORK/state
HOMES=$WORK/homes
# permissive stand-ins for the 0700 state and image dirs (controls of their masks)
OPEN_STATE=$WORK/state-open
OPEN_HOMES=$WORK/homes-open
CGP=labd-test-$$
LOG=$WORK/log
LISTENER=
cleanup() {
	[ -n "$LISTENER" ] && kill "$LISTENER" 2>/dev/null
	declare -F peer_cleanup >/dev/null && peer_cleanup
	jobs -p | xargs -r kill -9 2>/dev/null
	wait 2>/dev/null
	"$LABBOX" gc --all --state-dir "$STATE" >/dev/null 2>&1
	"$LABBOX" gc --all --state-dir "$OPEN_STATE" >/dev/null 2>&1
	grep -o " $WORK[^ ]*" /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l 2>/dev/null
	for img in "$HOMES"/*.img "$OPEN_HOMES"/*.img; do
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

# Controls outside any sandbox.
# hostroot CMD...: host root with every capability, no filter, in a private mount
# namespace whose /tmp is a fresh tmpfs (so mount, umount and pivot_root change
# nothing of the host's).
hostroot() { unshare -m --propagation private -- sh -c 'mount -t tmpfs labd-control /tmp && exec "$@"' sh "$@"; }
# nobody CMD...: host uid 65534, no capability at all, no filter.
nobody() { (cd / && setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all -- "$@"); }
# as_uid UID CMD...: a host uid, no capability, no filter (the sandbox user's host uid)
as_uid() { (cd / && setpriv --reuid="$1" --regid="$1" --clear-groups --inh-caps=-all --bounding-set=-all -- "${@:2}"); }

# Gates: a sandbox command holds on a FIFO until the suite releases it, so host-side
# checks run while the sandbox is certainly up (no fixed sleeps).
# gate NAME creates it; "$(held NAME)" is the shell line that waits on it inside the
# sandbox (the work dir is visible read-only there); release NAME opens it.
gate() { mkfifo -m 0666 "$WORK/gate.$1"; }
held() { echo "timeout 60 cat $WORK/gate.$1 >/dev/null"; }
release() { timeout 10 sh -c ': >"$1"' sh "$WORK/gate.$1" || echo "release $1: no sandbox was waiting" >&2; }
# has_line FILE LINE: FILE has a line that is exactly LINE
has_line() { grep -qx -- "$2" "$1" 2>/dev/null; }
# descendants PID: every process below PID
descendants() { local k; for k in $(pgrep -P "$1"); do echo "$k"; descendants "$k"; done; }
# box_init PID: host pid of the sandbox init (pid 1 of its own pid namespace) below PID
box_init() {
	local p
	for p in $(descendants "$1"); do
		if awk '/^NSpid:/ { exit !(NF > 2 && $NF == 1) }' "/proc/$p/status" 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

echo "== syscall surface (seccomp, capabilities, user namespace)"
for c in mount umount pivot_root chroot unshare-user unshare-mnt clone-newuser setns ptrace-init \
	bpf keyctl add_key perf_event_open init_module finit_module kexec_load userfaultfd \
	io_uring_setup open_by_handle_at tiocsti af_alg af_vsock; do
	expect "$c denied" EPERM "$(probe "$c")"
done
expect "clone3 answered ENOSYS (libc falls back to clone)" ENOSYS "$(probe clone3)"
expect "i386 int 0x80 kills (native arch only)" SYS "$(probe int80)"

# A capability-less process gets EPERM from mount, umount, pivot_root, chroot, setns,
# unshare(CLONE_NEWNS) and userfaultfd (and from init_module or kexec_load on kernels
# that have them) with no filter at all, so the EPERMs above do not show the filter
# by themselves.  Controls, the same probe each time:
#  - host root, no filter (private namespaces): gets past the defence: OK, or the error
#    its harmless arguments earn (never EPERM), so the probe really makes the call;
#  - host root with every capability and only labd's filter (seccomp_only): EPERM, so
#    the filter alone refuses the call, whatever the capabilities;
#  - the "-e" variants pass an argument the kernel rejects before any capability
#    check: without the filter even uid 65534 with no capability gets the kernel's
#    errno, so EPERM for them inside the sandbox is the sandbox's filter.
# Not run outside a sandbox: ptrace-init (host root would attach to the host's init)
# and add_key (it would add a key to this shell's session keyring).
cp "$ROOT/$BUILD/tests/security/seccomp_only" "$WORK/seccomp_only" 2>"$LOG" ||
	ko "seccomp_only built by make tests" "built" "$(cat "$LOG")"
while read -r c host; do
	expect_re "control $c: host root without the filter gets past" "$host" "$(hostroot "$PROBE" "$c" 2>&1)"
	expect "control $c: host root under labd's filter alone gets EPERM" EPERM \
		"$(hostroot "$WORK/seccomp_only" "$PROBE" "$c" 2>&1)"
done <<'EOF'
mount OK
umount OK
pivot_root OK
chroot OK
unshare-user OK
unshare-mnt OK
clone-newuser OK
setns OK
bpf EINVAL
keyctl OK|ENOKEY
perf_event_open EFAULT
init_module ENOEXEC|ENOSYS
finit_module EBADF|ENOSYS
kexec_load EINVAL|ENOSYS
userfaultfd OK
io_uring_setup EFAULT
open_by_handle_at EFAULT|EBADF
tiocsti ENOTTY
af_alg OK|EAFNOSUPPORT
af_vsock OK|EAFNOSUPPORT
EOF
while read -r c kernel; do
	expect "control $c: no capability and no filter gets the kernel's $kernel" "$kernel" "$(nobody "$PROBE" "$c" 2>&1)"
	expect "$c denied by the sandbox's filter (the kernel would say $kernel)" EPERM "$(probe "$c")"
done <<'EOF'
mount-efault EFAULT
umount-einval EINVAL
chroot-enoent ENOENT
setns-ebadf EBADF
unshare-einval EINVAL
EOF

# Class 7 tightening: personality values, socket families by allow-list, more terminal
# ioctls.  Each refused case has two controls: host root without the filter gets past
# (OK, or the error its harmless arguments earn), and host root with every capability
# under labd's filter alone gets EPERM, so the filter is what refuses it.  Allowed cases
# show the allow-list keeps what Jupyter and pip need.
while read -r name host args; do
	# shellcheck disable=SC2086 # args is a list of words
	expect "$name denied" EPERM "$(probe $args)"
	# shellcheck disable=SC2086
	expect_re "control $name: host root without the filter gets past" "$host" "$(hostroot "$PROBE" $args 2>&1)"
	# shellcheck disable=SC2086
	expect "control $name: host root under labd's filter alone gets EPERM" EPERM \
		"$(hostroot "$WORK/seccomp_only" "$PROBE" $args 2>&1)"
done <<'EOF'
personality(READ_IMPLIES_EXEC) OK personality 400000
personality(ADDR_NO_RANDOMIZE) OK personality 40000
personality(PER_LINUX|upper-bits) OK personality 100000000
socket(AF_PACKET) OK socket 17 3
socket(AF_KEY) OK|EAFNOSUPPORT socket 15 3 2
socket(AF_XDP) OK|EAFNOSUPPORT|EPROTOTYPE socket 44 3
socket(AF_NETLINK,NETLINK_AUDIT) OK socket 16 3 9
socket(AF_NETLINK,NETLINK_KOBJECT_UEVENT) OK socket 16 2 15
socket(AF_PACKET|upper-bits) OK socket 4294967313 3
ioctl(TIOCSETD) ENOTTY tiocsetd
ioctl(TIOCLINUX) ENOTTY tioclinux
EOF
# Bluetooth only inside (host root would load the module): the same rule as AF_PACKET.
expect "socket(AF_BLUETOOTH) denied" EPERM "$(probe socket 31 1 3)"
while read -r name args; do
	# shellcheck disable=SC2086
	expect "$name allowed (Jupyter, ZMQ, pip)" OK "$(probe $args)"
done <<'EOF'
personality(PER_LINUX) personality 0
personality(query) personality ffffffff
personality(PER_LINUX32) personality 8
socket(AF_UNIX) socket 1 1
socket(AF_INET) socket 2 2
socket(AF_INET6) socket 10 1
socket(AF_NETLINK,NETLINK_ROUTE) socket 16 3 0
EOF

# mknod of a device needs CAP_MKNOD; the same call for a FIFO in the same place, and
# the same device as host root, show that the path and the probe are not the reason.
expect "mknod of a device denied" EPERM "$(probe mknod /tmp/null2)"
expect "control mknod: a FIFO in the same sandbox dir is allowed" OK "$(probe mknod /tmp/fifo2 fifo)"
expect "control mknod: host root makes the same device node" OK "$(hostroot "$PROBE" mknod /tmp/null2 2>&1)"
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
# Class 8: the host's accounts.  The sandbox has its own /etc/passwd and /etc/group
# (sandbox/accounts.c): root, the lab user under their labd name with the HOME the
# sandbox sets, nobody.  Control: the host's own lists more (and no alice).
expect "accounts: whoami is the lab user" alice "$(box alice 7 -- whoami)"
expect "accounts: passwd lists root, the user and nobody only" "root alice nobody" \
	"$(box alice 7 -- getent passwd | cut -d: -f1 | squash)"
expect "accounts: group lists root, the user's group and nogroup only" "root alice nogroup" \
	"$(box alice 7 -- getent group | cut -d: -f1 | squash)"
expect "accounts: the passwd home is HOME" "/home/alice /home/alice" \
	"$(box alice 7 -- sh -c 'getent passwd alice | cut -d: -f6; echo "$HOME"' | squash)"
expect "accounts: id names the user's group" "uid=1000(alice) gid=1000(alice) groups=1000(alice)" \
	"$(box alice 7 -- id)"
expect "accounts: /etc/passwd bound read-only" EROFS "$(probe write /etc/passwd)"
# its own /etc/hosts names its hostname (torchrun, gloo and MPI look their host up), read-only
expect "hosts: the hostname resolves to 127.0.1.1" "127.0.1.1 alice" \
	"$(box alice 7 -- getent hosts alice | squash)"
expect "hosts: /etc/hosts bound read-only" EROFS "$(probe write /etc/hosts)"
host_accounts=$(getent passwd | cut -d: -f1 | squash)
if [ "$host_accounts" != "root alice nobody" ]; then ok "control accounts: the host's passwd lists others (${host_accounts:0:40}...)"; else ko "control accounts: the host's passwd differs" "more accounts" "$host_accounts"; fi
# /root, the state dir and the image dir are 0700 on the host: the inner uid gets
# EACCES there with or without the mask.  So each mask is also seen for what it is (an
# empty read-only tmpfs of mode 000, unlike the host's dir) and tried on a permissive
# stand-in, which the sandbox's host uid can read outside but not inside.
expect "/root unreadable" EACCES "$(probe open /root)"
expect "/root masked by an empty tmpfs" "tmpfs 000 ro" "$(probe fs /root)"
host_root_fs=$("$PROBE" fs /root)
if [ "$host_root_fs" != "tmpfs 000 ro" ]; then ok "control /root: the host's /root is not that ($host_root_fs)"; else ko "control /root: the host's /root differs" "not tmpfs 000 ro" "$host_root_fs"; fi
mkdir -p "$WORK/open" && echo hello >"$WORK/open/f" && chmod 755 "$WORK/open" && chmod 644 "$WORK/open/f"
expect "control --mask: a world-readable dir is readable without the mask" "OK 6" "$(probe read "$WORK/open/f")"
expect "--mask hides a world-readable dir" EACCES "$(box alice 7 --mask "$WORK/open" -- "$PROBE" read "$WORK/open/f")"
expect "labd state dir unreadable" EACCES "$(probe stat "$STATE/sandboxes")"
expect "labd state dir masked by an empty tmpfs" "tmpfs 000 ro" "$(probe fs "$STATE")"
mkdir -p "$OPEN_STATE" && chmod 755 "$OPEN_STATE" && echo hello >"$OPEN_STATE/f" && chmod 644 "$OPEN_STATE/f"
expect "control state dir: a world-readable one is readable by the host uid outside" "OK 6" \
	"$(as_uid 200007 "$PROBE" read "$OPEN_STATE/f")"
expect "state dir masked even when world-readable" EACCES \
	"$(box alice 7 --state-dir "$OPEN_STATE" -- "$PROBE" read "$OPEN_STATE/f")"
# /proc/sys files are root's 0644: EACCES for the inner uid even if writable, so the
# read-only bind is checked as such, against the rest of the same /proc
expect "/proc/sys not writable" EACCES "$(probe write /proc/sys/kernel/core_pattern)"
expect "/proc/sys bound read-only" "proc 555 ro" "$(probe fs /proc/sys)"
expect "control /proc/sys: the sandbox's /proc itself is read-write" "proc 555 rw" "$(probe fs /proc)"
# Class 7: world-readable host places are hidden by default (configurable: --show, and
# [runtime] hidden_paths for labd); the work dir itself lives under /var/lib, which is
# not hidden.  Controls: the same places as the host shows them.
for d in /var/tmp /srv /opt /mnt /media; do
	[ -d "$d" ] || continue
	expect "$d hidden by default" "tmpfs 000 ro" "$(probe fs "$d")"
	host_fs=$("$PROBE" fs "$d")
	if [ "$host_fs" != "tmpfs 000 ro" ]; then ok "control $d: the host's is not that ($host_fs)"; else ko "control $d: the host's differs" "not tmpfs 000 ro" "$host_fs"; fi
done
expect "control --show /opt: shown as the host's when the caller asks" "$("$PROBE" fs /opt | sed 's/ rw$/ ro/')" \
	"$(box alice 7 --show /opt -- "$PROBE" fs /opt)"
expect "--show of a place not on the hidden list refused" 2 "$(box alice 7 --show /usr -- true; echo $?)"
# Read-only binds (spec.ro_binds, how labd's JupyterLab env under the hidden /opt is
# used): a directory below a masked place is bound at its own path, read-only, and
# the rest of that place stays hidden; the scaffold holding the bind is read-only too.
RBH=$WORK/robind
mkdir -p "$RBH/env/bin" "$RBH/other" && chmod 755 "$RBH" "$RBH/env" "$RBH/other"
chmod 777 "$RBH/env/bin" # only the read-only mount can refuse a write there
echo abc >"$RBH/env/bin/f" && echo s3cret >"$RBH/other/f" && chmod 644 "$RBH/env/bin/f" "$RBH/other/f"
rb() { box alice 7 --mask "$RBH" --ro-bind "$RBH/env" -- "$PROBE" "$@"; }
expect "read-only bind below a masked place: readable at its own path" "OK 4" "$(rb read "$RBH/env/bin/f")"
expect "control: without the bind the masked place hides it" EACCES \
	"$(box alice 7 --mask "$RBH" -- "$PROBE" read "$RBH/env/bin/f")"
expect "read-only bind: a write refused by the mount (the dir is 0777)" EROFS "$(rb write "$RBH/env/bin/g")"
expect "read-only bind: the host's directory, mounted read-only" "$("$PROBE" fs "$RBH/env" | sed 's/ rw$/ ro/')" \
	"$(rb fs "$RBH/env")"
expect "read-only bind: the rest of the masked place stays hidden" ENOENT "$(rb read "$RBH/other/f")"
expect "read-only bind: the scaffold over the masked place is read-only" EROFS "$(rb mkdir "$RBH/x")"
expect "read-only bind: refused inside the state dir (labbox exit 125)" 125 \
	"$(box alice 7 --ro-bind "$STATE/x" -- true >/dev/null 2>&1; echo $?)"
# The driver's libraries on the host's root too (a host that reaches them only through
# LD_LIBRARY_PATH): bound read-only at /run/nvidia/lib and on the loader's path.
expect "--driver-lib-dir on the host's root: bound and on LD_LIBRARY_PATH" "/run/nvidia/lib abc EROFS" \
	"$(box alice 7 --driver-lib-dir "$RBH/env" -- sh -c 'echo "$LD_LIBRARY_PATH"; cat /run/nvidia/lib/bin/f; "$0" write /run/nvidia/lib/bin/g' "$PROBE" | squash)"
# A sandbox makes its own mount points whatever the host has: with /opt shown (not
# hidden) and a bind at a path the host's read-only /opt lacks (a job's
# /opt/labd/libexec on a host without /opt/labd), a small read-only layer goes over /opt
# holding every host entry as itself and the new mount point.
if [ -d /opt ]; then
	LAY=/opt/labd-absent-$$/libexec
	lay() { box alice 7 --show /opt --bind "$RBH/env:$LAY:ro" -- "$PROBE" "$@"; }
	expect "layer: a bind at a mount point the host's /opt lacks is there" "OK 4" "$(lay read "$LAY/bin/f")"
	expect "layer: the host's /opt entries are all still shown" \
		"$( (ls -A /opt; echo "labd-absent-$$") | sort | squash)" \
		"$(box alice 7 --show /opt --bind "$RBH/env:$LAY:ro" -- ls -A /opt | sort | squash)"
	first=$(find /opt -mindepth 1 -maxdepth 1 -type d -perm -o+rx | sort | head -n 1)
	[ -n "$first" ] && expect "layer: a host entry is the host's own tree, read-only" \
		"$("$PROBE" fs "$first" | sed 's/ rw$/ ro/')" "$(lay fs "$first")"
	expect "layer: the layer itself is read-only" EROFS "$(lay mkdir /opt/x)"
	[ -e "/opt/labd-absent-$$" ] && ko "layer: nothing made on the host" absent present
else
	skip "layer over the host's /opt" "the host has no /opt"
fi
# /proc/asound lists the host's sound cards (and its controls); masked where it exists
if [ -d /proc/asound ]; then
	expect "/proc/asound masked" "tmpfs 000 ro" "$(probe fs /proc/asound)"
else
	expect "/proc/asound absent (the host has no sound: nothing to mask)" ENOENT "$(probe fs /proc/asound)"
fi

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

# Class 1: nothing the user writes lands on the host's disk outside the home and the
# size-limited tmpfs mounts.  Every place that could be writable is tried with 256 MiB:
# each must refuse (ENOSPC at a tmpfs cap, EROFS, EACCES...), never take it all (the
# files stay until the sandbox ends, so the disk is measured with them); stdin
# is /dev/null opened read-only (stdout and stderr of a runtime are the supervisor's
# capped pipe, tests/integration/test_runtime_host_resources.py).  The state file
# system's free space must not drop by anything like that (other engineers' builds
# share the disk: 128 MiB of slack, half of one place's 256).  The control fills a
# writable host dir outside.
places="/run/labd /dev/shm /var/tmp / /etc /usr /var /var/lib /dev /run /home /proc /sys /opt /srv /mnt /media $WORK"
free_kib() { df -Pk "$STATE" | awk 'NR == 2 { print $4 }'; }
mkdir -p "$STATE"
gate fill
free_before=$(free_kib)
box alice 7 --mem 128M --run-dir "$STATE/fill-run" --stdin /dev/null -- \
	sh -c "\"\$0\" fillplaces 256 \$*; $(held fill)" "$PROBE" $places >"$WORK/fill.out" &
fillbox=$!
wait_until 120 "the fill to end" grep -q '^fd0 ' "$WORK/fill.out"
free_after=$(free_kib) # measured while the sandbox (and whatever it wrote) still exists
release fill
wait "$fillbox"
out=$(cat "$WORK/fill.out")
bad=$(echo "$out" | awk '$2 == "FULL" || $2 == "OK" { print }' | squash)
expect "no writable place takes 256 MiB outside home and /tmp" "" "$bad"
expect_re "run dir: capped tmpfs" "ENOSPC" "$(echo "$out" | awk '$1 == "/run/labd" { print $2 }')"
expect_re "/dev/shm: capped tmpfs" "ENOSPC" "$(echo "$out" | awk '$1 == "/dev/shm" { print $2 }')"
expect_re "/var/tmp: hidden" "EACCES|EROFS" "$(echo "$out" | awk '$1 == "/var/tmp" { print $2 }')"
expect_re "fd 0: read-only /dev/null" "EBADF" "$(echo "$out" | awk '$1 == "fd0" { print $2 }')"
expect_re "every place tried ($(echo "$out" | wc -l) lines)" "19" "$(echo "$out" | wc -l)"
used_kib=$((free_before - free_after))
if [ "$used_kib" -lt 131072 ]; then ok "state file system's free space unchanged (${used_kib} KiB used meanwhile)"; else ko "state file system's free space unchanged" "< 131072 KiB used" "$used_kib KiB"; fi
mkdir -p "$WORK/writable" && chmod 777 "$WORK/writable"
expect "control fillplaces: a writable host dir takes it all" "$WORK/writable FULL" \
	"$(as_uid 200007 "$PROBE" fillplaces 8 "$WORK/writable" </dev/null | head -n 1)"
rm -f "$WORK/writable/.labd-fill"
# tmpfs pages are charged to the memory cgroup of the process writing them: /tmp bigger
# than the memory limit fills the cgroup, and the OOM killer stops the sandbox, not the host.
box alice 7 --mem 64M --tmp 512M -- "$PROBE" fill /tmp/f >/dev/null
rc=$?
expect "/tmp beyond the memory limit: the sandbox is OOM-killed (tmpfs charged to its memcg)" 137 "$rc"
expect "control /tmp: the same fill within the memory limit hits the tmpfs size" "ENOSPC 32" \
	"$(box alice 7 --mem 128M --tmp 32M -- "$PROBE" fill /tmp/f)"
expect "host unaffected: the next sandbox runs" OK "$(probe write /tmp/x)"

# Mount propagation, found where the sandbox's mounts really are: the mountinfo of its
# init.  Its own mounts are those whose device (a fresh proc, sysfs, devpts or tmpfs
# superblock) the host had none of before it started; a propagated copy in the host
# would carry the same device.  A shared peer group seen in both namespaces would mean
# propagation either way.  The control runs the same check on a namespace that does
# propagate (a mount under a shared bind mount of the work dir).
devs() { awk '{ print $3 }' "$1" | sort -u; }
peers() { grep -o 'shared:[0-9]*' "$1" | sort -u; }
# propagation PID BEFORE: "own=N leaked=N shared-peers=N" for PID's mount namespace
propagation() {
	local own leaked shared
	own=$(comm -23 <(devs "/proc/$1/mountinfo") "$2")
	leaked=$(comm -12 <(echo "$own") <(devs /proc/self/mountinfo) | grep -c .)
	shared=$(comm -12 <(peers "/proc/$1/mountinfo") <(peers /proc/self/mountinfo) | grep -c .)
	echo "own=$(echo "$own" | grep -c .) leaked=$leaked shared-peers=$shared"
}
devs /proc/self/mountinfo >"$WORK/devs.before"
gate prop
box alice 7 -- sh -c "echo ready; $(held prop)" >"$WORK/prop.out" &
propbox=$!
if wait_until 15 "the sandbox to start" has_line "$WORK/prop.out" ready && init=$(box_init "$propbox"); then
	report=$(propagation "$init" "$WORK/devs.before")
	rootline=$(awk '$5 == "/" { print $6 }' "/proc/$init/mountinfo" | cut -d, -f1)
	if [[ $report =~ ^own=([0-9]+)\ leaked=0\ shared-peers=0$ ]] && [ "${BASH_REMATCH[1]}" -ge 5 ] && [ "$rootline" = ro ]; then
		ok "no sandbox mount propagates to the host (init $init: read-only root, $report)"
	else
		ko "no sandbox mount propagates to the host" "own>=5 leaked=0 shared-peers=0, root ro" "$report, root $rootline"
	fi
else
	ko "no sandbox mount propagates to the host" "a running sandbox init" "none found"
fi
release prop
wait "$propbox"
mkdir -p "$WORK/shared"
mount --bind "$WORK/shared" "$WORK/shared" && mount --make-shared "$WORK/shared"
devs /proc/self/mountinfo >"$WORK/devs.before"
gate propctl
unshare -m --propagation unchanged -- sh -c "mount -t tmpfs labd-control $WORK/shared && echo ready && $(held propctl)" \
	>"$WORK/propctl.out" 2>"$LOG" &
ctl=$!
if wait_until 10 "the control namespace" has_line "$WORK/propctl.out" ready; then
	report=$(propagation "$ctl" "$WORK/devs.before")
	expect_re "control propagation: a namespace under a shared mount is caught" "own=[1-9][0-9]* leaked=[1-9][0-9]* shared-peers=[1-9][0-9]*" "$report"
else
	ko "control propagation: a namespace under a shared mount is caught" "ready" "$(cat "$WORK/propctl.out")"
fi
release propctl
wait "$ctl"
# the propagated tmpfs sits on the bind mount: unmount both
while mountpoint -q "$WORK/shared"; do umount "$WORK/shared" || break; done

echo "== network"
port=$((20000 + RANDOM % 20000))
python3 -c "import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $port)); s.listen(8); time.sleep(120)" &
LISTENER=$!
listening() { (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; }
if wait_until 5 "the host listener on 127.0.0.1:$port" listening; then
	expect "host 127.0.0.1 listener unreachable" ECONNREFUSED "$(probe connect $port)"
	expect "host 127.0.0.1 listener unreachable with --net egress" ECONNREFUSED \
		"$(box alice 7 --net egress -- "$PROBE" connect $port)"
	expect "host 127.0.0.1 listener unreachable with --net egress on veth" ECONNREFUSED \
		"$(box alice 7 --net egress --net-path veth -- "$PROBE" connect $port)"
else
	ko "host 127.0.0.1 listener unreachable" "listener up" "host listener did not start"
fi
kill "$LISTENER" 2>/dev/null
LISTENER=
expect "only loopback inside" lo "$(box alice 7 -- ls /sys/class/net | squash)"
expect "--net egress: pasta's eth0 and lo" "eth0 lo" "$(box alice 7 --net egress -- ls /sys/class/net | squash)"
# the veth path: eth0 (IPv4 only), and its host table, veth and claim gone with the sandbox
expect "--net-path veth: eth0 and lo, no IPv6" "eth0 lo 1" \
	"$(box alice 7 --net egress --net-path veth -- sh -c 'ls /sys/class/net; cat /proc/sys/net/ipv6/conf/eth0/disable_ipv6' | squash)"
expect "--net-path veth: nothing left on the host after the sandbox" "" \
	"$(ls /run/labd-veth 2>/dev/null | grep -v uplinks | while read -r n; do grep -l "$STATE" "/run/labd-veth/$n" 2>/dev/null; done)"
# --pasta PATH: the program started as pasta (bench/egress-bench.py's candidates), with
# pasta's arguments; one that is not there fails the start
printf '#!/bin/sh\necho "$@" >"%s"\nexec /usr/bin/pasta "$@"\n' "$WORK/pasta.args" >"$WORK/pasta.wrap"
chmod 0755 "$WORK/pasta.wrap"
expect "--pasta: the named program configures the namespace" "eth0 lo" \
	"$(box alice 7 --net egress --pasta "$WORK/pasta.wrap" -- ls /sys/class/net | squash)"
expect "--pasta: it gets pasta's arguments" "--no-map-gw" "$(grep -o -- '--no-map-gw' "$WORK/pasta.args" 2>/dev/null)"
box alice 7 --net egress --pasta "$WORK/no-such-pasta" -- /bin/true
expect "--pasta: a program that is not there fails the start" 125 "$?"
# pasta starts in <id>.net, then runs in the sandbox's own cgroup, charged to the user's
# limits (finding 13); labbox's teardown kills it with the sandbox
sandbox_procs() { cat /sys/fs/cgroup/pids/"$CGP"/"$1"/cgroup.procs /sys/fs/cgroup/"$CGP"/"$1"/cgroup.procs 2>/dev/null; }
gate pasta
box alice 7 --net egress -- sh -c "echo ready; $(held pasta)" >"$WORK/pasta.out" &
pastabox=$!
if wait_until 15 "the egress sandbox to start" has_line "$WORK/pasta.out" ready; then
	sid=$(cd "$STATE/sandboxes" && ls -- *.state | sed 's/\.state$//' | head -n 1)
	pasta=$(cat "$STATE/sandboxes/$sid.pasta.pid" 2>/dev/null)
	procs=$(sandbox_procs "$sid") # cat fails on the hierarchy this host lacks
	if [ -n "$pasta" ] && grep -qx -- "$pasta" <<<"$procs"; then
		ok "--net egress: pasta ($pasta) runs in the sandbox's cgroup $sid"
	else
		ko "--net egress: pasta runs in the sandbox's cgroup" "pid $pasta in $sid" "$(squash <<<"$procs")"
	fi
	expect "--net egress: pasta's start-up cgroup is gone once it runs" "" "$(ls -d /sys/fs/cgroup/*/"$CGP"/*.net /sys/fs/cgroup/"$CGP"/*.net 2>/dev/null)"
else
	ko "--net egress: pasta runs in the sandbox's cgroup" "a running sandbox" "none found"
fi
release pasta
wait "$pastabox"
# gone, or a zombie until the host's init reaps it (labbox, its parent, has exited)
pasta_gone() { [ -z "${pasta:-}" ] || ! grep -qv '^State:.*Z' <(grep '^State:' "/proc/$pasta/status" 2>/dev/null); }
if wait_until 10 "pasta $pasta to end" pasta_gone; then ok "--net egress: no pasta left after the sandbox"; else ko "--net egress: no pasta left after the sandbox" "pasta $pasta gone" "$(grep '^State:' "/proc/$pasta/status" 2>/dev/null)"; fi
# An image whose /etc/resolv.conf links into /run (systemd-resolved's stub) gets pasta's
# resolver there (/run is the sandbox's own tmpfs); a link elsewhere is refused: it would
# be followed on the host's side of the mount namespace.
IMG=$WORK/img
mkdir -p "$IMG"/usr "$IMG"/proc "$IMG"/sys "$IMG"/dev "$IMG"/tmp "$IMG"/run "$IMG"/home "$IMG"/etc
for l in bin lib lib64 sbin; do ln -s "usr/$l" "$IMG/$l"; done
mount --bind /usr "$IMG/usr"
ln -s ../run/systemd/resolve/stub-resolv.conf "$IMG/etc/resolv.conf"
expect "--net egress: resolv.conf linked into /run gets pasta's resolver" "nameserver 169.254.1.53" \
	"$(box alice 7 --image "$IMG" --net egress -- /bin/head -n 1 /etc/resolv.conf)"
ln -sfn /etc/hostname "$IMG/etc/resolv.conf"
box alice 7 --image "$IMG" --net egress -- /bin/true
expect "--net egress: resolv.conf linked outside /run refused" 125 "$?"
# The image's /etc/passwd is shadowed only when it is a plain file: a link would be
# followed on the host's side.  The child's step is named even when pasta, started for
# the namespace meanwhile, found it gone (start.c, prefer_child_report).
ln -sfn ../run/systemd/resolve/stub-resolv.conf "$IMG/etc/resolv.conf"
ln -sfn /etc/hostname "$IMG/etc/passwd"
box alice 7 --image "$IMG" --net egress -- /bin/true
expect "accounts: an image's /etc/passwd that is a link refused" \
	"125 step mounts: accounts: not a plain file in the image: /etc/passwd" \
	"$? $(grep -o 'step [a-z-]*: accounts: .*passwd' "$LOG" | head -n 1 | sed 's/: Invalid argument$//')"
rm -f "$IMG/etc/passwd"
# An image without /opt at all: the layer goes over its root, every entry kept.
expect "layer: a bind below a place the image lacks (/opt/ml), over its root" \
	"abc bin dev etc home lib lib64 opt proc run sbin sys tmp usr" \
	"$(box alice 7 --image "$IMG" --bind "$RBH/env:/opt/ml:ro" -- /bin/sh -c 'cat /opt/ml/bin/f; ls /' | squash)"
umount "$IMG/usr"

echo "== resources"
hostlat=$WORK/hostlat
# the probe prints its result once fork fails, then holds its children for 2 s: the
# host's latency is measured while the bomb is at its limit
box alice 7 --pids 64 -- "$PROBE" forkbomb 2 >"$WORK/bomb" &
bomb=$!
wait_until 15 "the fork bomb to reach its limit" test -s "$WORK/bomb"
t0=$(date +%s%N)
/bin/true
t1=$(date +%s%N)
echo $(((t1 - t0) / 1000000)) >"$hostlat"
wait "$bomb"
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
# control: preloaded into a host process, evil.so does leave its marker
LD_PRELOAD="$WORK/evil.so" /bin/true
expect "control LD_PRELOAD: evil.so preloaded on the host leaves its marker" present \
	"$([ -e "$WORK/marker" ] && echo present || echo absent)"
rm -f "$WORK/marker"
# first use: mkfs.ext4 runs on the host while the user's environment asks for LD_PRELOAD;
# the probe shows the variable did reach the sandbox (where the read-only root keeps
# evil.so's marker out), so "absent" is about the host helpers
preload=$(home_a --env LD_PRELOAD="$WORK/evil.so" -- sh -c 'echo persist-42 > $HOME/p && exec "$0" env LD_PRELOAD' "$PROBE")
expect "user LD_PRELOAD reaches no host helper" "$WORK/evil.so absent" \
	"$preload $([ -e "$WORK/marker" ] && echo present || echo absent)"
# A loop device's backing_file names the image behind it: every other user's home image
# name, readable by anyone through sysfs.  The sandbox's sysfs hides the virtual block
# devices; the control reads the same file on the host while the sandbox holds the home.
gate bf
home_a -- sh -c "cat /sys/block/loop*/loop/backing_file /sys/devices/virtual/block/*/loop/backing_file 2>/dev/null | grep -c alice.img; $(held bf)" >"$WORK/bf.out" &
bfbox=$!
host_lists_image() { cat /sys/block/loop*/loop/backing_file 2>/dev/null | grep -q "$A"; }
if wait_until 15 "alice's home on a loop device" host_lists_image; then
	ok "control backing_file: the host lists alice's image while her sandbox runs"
else
	ko "control backing_file: the host lists alice's image" "$A" "$(cat /sys/block/loop*/loop/backing_file 2>/dev/null | squash)"
fi
release bf
wait "$bfbox"
expect "loop backing_file hidden inside (no image names)" 0 "$(head -n 1 "$WORK/bf.out")"
expect "home persists across sandboxes" persist-42 "$(home_a -- cat /home/alice/p)"
home_a -- "$PROBE" write /home/alice/owned >/dev/null
expect "home files owned by the mapped host uid" 200007 \
	"$(debugfs -R 'stat /owned' "$A" 2>/dev/null | sed -n 's/.*User: *\([0-9]*\).*/\1/p')"
expect "HOME set and is the cwd" "/home/alice /home/alice" "$(home_a -- sh -c 'echo $HOME $(pwd)')"
home_b -- true
expect "other users' homes absent" alice "$(home_a -- ls /home | squash)"
expect "home images unreachable" EACCES "$(home_a -- "$PROBE" stat "$B")"
expect "home image dir masked by an empty tmpfs" "tmpfs 000 ro" "$(home_a -- "$PROBE" fs "$HOMES")"
mkdir -p "$OPEN_HOMES" && chmod 755 "$OPEN_HOMES" && echo hello >"$OPEN_HOMES/f" && chmod 644 "$OPEN_HOMES/f"
expect "control image dir: a world-readable one is readable by the host uid outside" "OK 6" \
	"$(as_uid 200009 "$PROBE" read "$OPEN_HOMES/f")"
expect "image dir masked even when world-readable" EACCES \
	"$(box carol 9 --home-image "$OPEN_HOMES/carol.img" --home-size 16M -- "$PROBE" read "$OPEN_HOMES/f")"
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
usage=$("$LABBOX" home usage --user alice --user-id 7 --home-image "$A" --state-dir "$STATE")
case "$usage" in size=[1-9]*) ok "usage readable from the host ($usage)" ;; *) ko "usage readable from the host" "size=..." "$usage" ;; esac
# online growth needs CAP_SYS_RESOURCE (EXT4_IOC_RESIZE_FS); some VMs withhold it
if [ $((0x$(sed -n 's/^CapEff:\t//p' /proc/self/status) >> 24 & 1)) -eq 1 ]; then
	gate grow
	home_a -- sh -c "echo ready; $(held grow); df -B1 --output=size /home/alice | tail -1" >"$WORK/grow" &
	growbox=$!
	wait_until 15 "alice's home to be mounted" has_line "$WORK/grow" ready
	"$LABBOX" home grow --user alice --user-id 7 --home-image "$A" --state-dir "$STATE" --size 48M 2>"$LOG"
	release grow
	wait "$growbox"
	size_after=$(grep -vx ready "$WORK/grow" | tr -d ' ')
	if [ -n "$size_after" ] && [ "$size_after" -gt $((36 << 20)) ]; then
		ok "home grown online while mounted ($size_after bytes)"
	else
		ko "home grown online while mounted" ">36 MiB" "$size_after"
	fi
else
	skip "home grown online while mounted" "this host withholds CAP_SYS_RESOURCE from root"
	"$LABBOX" home grow --user alice --user-id 7 --home-image "$A" --state-dir "$STATE" --size 48M 2>"$LOG"
	size_after=$(home_a -- df -B1 --output=size /home/alice | tail -1 | tr -d ' ')
	if [ -n "$size_after" ] && [ "$size_after" -gt $((36 << 20)) ]; then
		ok "home grown offline ($size_after bytes)"
	else
		ko "home grown offline" ">36 MiB" "$size_after"
	fi
fi

# A sandbox started while another user's home is mounted must not carry a copy
# of that mount (the home's directory is an unbindable bind, which the recursive
# clone of the host's root skips): alice's loop device detaches once her sandbox
# ends although bob's, started while her home was mounted, still runs (before:
# it stayed attached until bob's ended). Mounting the home again attaches one
# device. Each step waits on the previous one's "ready" (gates, no sleeps).
gate first && gate bob && gate again
home_a -- sh -c "echo copy-check > \$HOME/c; echo ready; $(held first)" >"$WORK/first" &
homepid=$!
wait_until 15 "alice's first sandbox" has_line "$WORK/first" ready
box bob 8 -- sh -c "echo ready; $(held bob)" >"$WORK/bob" &
bobpid=$!
wait_until 15 "bob's sandbox" has_line "$WORK/bob" ready
bob_init=$(box_init "$bobpid")
in_bob=$(grep -c " $STATE/homes/" "/proc/$bob_init/mountinfo" 2>/dev/null)
release first
wait "$homepid"
detached() { ! losetup -j "$A" | grep -q .; }
if wait_until 2 "alice's loop device to detach" detached; then
	ok "home's loop device detached ${WAITED_MS} ms after its sandbox ended, a neighbour's sandbox running"
else
	ko "home's loop device detached within 2 s, a neighbour's sandbox running" "detached" \
		"$(losetup -j "$A" | squash) (bob's namespace holds $in_bob mounts under homes/)"
fi
expect "a neighbour's sandbox holds no mount of the homes" 0 "$in_bob"
home_a -- sh -c "cat \$HOME/c; echo again >> \$HOME/c; echo ready; $(held again)" >"$WORK/again" &
againpid=$!
wait_until 15 "alice's second sandbox" has_line "$WORK/again" ready
devices=$(losetup -j "$A" | wc -l)
release again
release bob
wait "$againpid" "$bobpid"
expect "a home is never attached to two loop devices" "copy-check 1" \
	"$(grep -vx ready "$WORK/again" | squash) $devices"
expect "home intact after a neighbour's sandbox" "copy-check again" "$(home_a -- cat /home/alice/c | squash)"
expect "no mount left under homes/ once the sandboxes ended" 0 "$(grep -c " $STATE/homes/" /proc/self/mountinfo)"

# symlinks planted in the user-writable run dir must not steer host-side teardown
# (the sandbox must have planted them: its exit status and its own listing say so)
mkdir -p "$WORK/victim" && echo keep >"$WORK/victim/file"
planted=$(box alice 7 --run-dir "$WORK/run-alice" -- sh -c \
	"ln -s $WORK/victim /run/labd/dir && ln -s $WORK/victim/file /run/labd/file && mkdir /run/labd/d && ln -s / /run/labd/d/root && ls /run/labd /run/labd/d")
rc=$?
expect "planted symlinks leave host files alone" "rc=0 planted=[/run/labd: d dir file /run/labd/d: root] keep gone" \
	"rc=$rc planted=[$(squash <<<"$planted")] $(cat "$WORK/victim/file") $([ -e "$WORK/run-alice" ] && echo left || echo gone)"

echo "== start-up steps, stdio and the process title"
# a failing step is named in labbox's stderr (the library's log line), and nothing of the
# half-built sandbox is left behind
held_resources() { echo "$(ls "$STATE/sandboxes" | wc -l) $(ls -d /sys/fs/cgroup/*/"$CGP"/*/ /sys/fs/cgroup/"$CGP"/*/ 2>/dev/null | wc -l)"; }
held_before=$(held_resources)
box alice 7 --home-image "$WORK/no-such-dir/sub/alice.img" -- true
rc=$?
expect "failing step named: home" "125 step home: mkdir $WORK/no-such-dir/sub: No such file or directory" \
	"$rc $(sed -n 's/.*sandbox [a-z0-9-]*: //p' "$LOG")"
box alice 7 --image "$WORK/no-such-root" -- true
expect "failing step named: clone (the root is cloned before the child)" "step clone: clone root $WORK/no-such-root: No such file or directory" \
	"$(sed -n 's/.*sandbox [a-z0-9-]*: //p' "$LOG")"
box alice 7 --driver-lib-dir "$WORK/no-such-libs" -- true
expect "failing step named: mount-sources (in the child)" "step mount-sources: clone driver libs $WORK/no-such-libs: No such file or directory" \
	"$(sed -n 's/.*sandbox [a-z0-9-]*: //p' "$LOG")"
box alice 7 -- /no/such/command
expect "failing step named: exec" "step exec: exec /no/such/command: No such file or directory" \
	"$(sed -n 's/.*sandbox [a-z0-9-]*: //p' "$LOG")"
expect "failed starts leave no state or cgroup" "$held_before" "$(held_resources)"
out=$(box alice 7 --stdout "$WORK/cmd.out" --stderr "$WORK/cmd.err" -- sh -c 'echo to-out; echo to-err >&2')
expect "stdout and stderr from the spec, the caller's untouched" "[] to-out to-err" \
	"[$out] $(cat "$WORK/cmd.out") $(cat "$WORK/cmd.err")"
echo from-file >"$WORK/cmd.in"
expect "stdin from the spec" from-file "$(box alice 7 --stdin "$WORK/cmd.in" -- cat)"
"$LABBOX" run --user alice --user-id 7 --uid-base 200000 --state-dir "$STATE" --cgroup-parent "$CGP" \
	-- sleep 3 2>"$LOG" &
titlebox=$!
init=
for _ in $(seq 50); do
	init=$(pgrep -P "$titlebox" | head -1)
	[ -n "$init" ] && [ "$(cat /proc/"$init"/comm 2>/dev/null)" = lsbx-alice ] && break
	sleep 0.1
done
expect "init's comm and command line name the sandbox on the host" "lsbx-alice labd-sandbox alice" \
	"$(cat /proc/"$init"/comm 2>/dev/null) $(tr '\0' '\n' </proc/"$init"/cmdline 2>/dev/null | head -1)"
expect "the caller's own command line untouched" "$LABBOX run --user alice" \
	"$(tr '\0' ' ' </proc/"$titlebox"/cmdline | cut -d' ' -f1-4)"
kill "$titlebox" 2>/dev/null
wait "$titlebox" 2>/dev/null

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
wait_until 10 "the command to be ready" has_line "$WORK/term.out" ready
init=$(box_init "$termbox")
[ -n "$init" ] && kill -TERM "$init"
wait_until 5 "the command to get SIGTERM" has_line "$WORK/term.out" got-term
expect "SIGTERM to init reaches the command (even if the caller blocked it)" "ready got-term" \
	"$(squash <"$WORK/term.out")"
kill -9 "$termbox" 2>/dev/null
wait "$termbox" 2>/dev/null

echo "== crash and teardown"
# killed once the writer has completed a write, so the next is under way
(exec "$LABBOX" run --user alice --user-id 7 --uid-base 200000 --state-dir "$STATE" --cgroup-parent "$CGP" \
	--home-image "$A" -- sh -c 'while :; do dd if=/dev/zero of=$HOME/w bs=64k count=32 conv=fsync 2>/dev/null; echo w; done' \
	2>/dev/null) >"$WORK/writes" &
lb=$!
wait_until 15 "the writer's first write" test -s "$WORK/writes"
kill -9 "$lb"
wait "$lb" 2>/dev/null
box_procs() { cat /sys/fs/cgroup/pids/"$CGP"/*/cgroup.procs /sys/fs/cgroup/"$CGP"/*/cgroup.procs 2>/dev/null | wc -l; }
no_box_procs() { [ "$(box_procs)" -eq 0 ]; }
if wait_until 5 "the sandbox's processes to die with labbox" no_box_procs; then
	ok "labbox SIGKILLed: no sandbox process survives (all gone ${WAITED_MS} ms after)"
else
	ko "labbox SIGKILLed: no sandbox process survives" "0 within 5 s" "$(box_procs)"
fi
"$LABBOX" gc --state-dir "$STATE" >/dev/null 2>"$LOG"
expect "home fsck clean after SIGKILL mid-write" 0 "$("$LABBOX" home fsck --user alice --home-image "$A" 2>"$LOG"; echo $?)"
expect "home mounts again after the crash" persist-42 "$(home_a -- cat /home/alice/p)"
leaks=$(
	grep -c " $WORK" /proc/self/mountinfo
	losetup -j "$A" | wc -l
	ls -d /sys/fs/cgroup/*/"$CGP"/*/ /sys/fs/cgroup/"$CGP"/*/ 2>/dev/null | wc -l
	ls "$STATE/sandboxes" 2>/dev/null | wc -l
)
expect "no leaked mounts, loop devices, cgroups or state" "0 0 0 0" "$(echo $leaks)" ||
	grep " $WORK" /proc/self/mountinfo | awk '{ print "    leaked mount: " $5 }'

echo "== GPU passthrough with stand-in devices"
# The device cgroup is tested by its effect: a process in the sandbox's own cgroup
# (found through its init's /proc/PID/cgroup) opens the allotted and another stand-in
# node.  Inside the sandbox the other node is not even there, so the host joins that
# cgroup to open it; the driverless stand-ins answer ENXIO once the cgroup lets an
# open through, and host root outside the cgroup gets ENXIO from nvidia0 too (the
# control: EPERM comes from the cgroup, not from the node).  cgroup v1 enforces with
# the devices controller (its devices.list is checked as well), v2 with a BPF program
# that has no list to read.
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then cgmode=v2; elif [ -d /sys/fs/cgroup/devices ]; then cgmode=v1; else cgmode=; fi
if [ -n "$cgmode" ]; then
	G=$WORK/gpudev
	mkdir -p "$G"
	mknod "$G/nvidia0" c 195 0 && mknod "$G/nvidia1" c 195 1 && mknod "$G/nvidiactl" c 195 255 &&
		mknod "$G/nvidia-modeset" c 195 254 && mknod "$G/nvidia-uvm" c 235 0
	gpu() { box alice 7 --gpu 1 --dev-prefix "$G" "$@"; }
	expect "only the allotted GPU nodes inside" "nvidia-uvm nvidia1 nvidiactl" "$(gpu -- sh -c 'ls /dev | grep nvidia' | squash)"
	expect "allotted GPU passes the device cgroup" ENXIO "$(gpu -- "$PROBE" open /dev/nvidia1)"
	# the driver numbers the GPUs a sandbox can open from 0; NVIDIA_VISIBLE_DEVICES names the host's
	expect "CUDA_VISIBLE_DEVICES counts from 0, NVIDIA_VISIBLE_DEVICES the host's" "0 1" \
		"$(gpu -- sh -c 'echo $CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES')"
	expect "control GPU: host root outside the sandbox's cgroup opens nvidia0 (no driver: ENXIO)" ENXIO \
		"$("$PROBE" open "$G/nvidia0")"
	gate gpu
	gpu -- sh -c "echo ready; $(held gpu)" >"$WORK/gpu.out" &
	gpubox=$!
	cg=
	if wait_until 15 "the GPU sandbox" has_line "$WORK/gpu.out" ready && init=$(box_init "$gpubox"); then
		if [ "$cgmode" = v2 ]; then
			cg=/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$init/cgroup")
		else
			cg=/sys/fs/cgroup/devices$(awk -F: '$2 ~ /(^|,)devices(,|$)/ { print $3 }' "/proc/$init/cgroup")
		fi
	fi
	if [ -n "$cg" ] && [ -e "$cg/cgroup.procs" ] && [ "$cg" != /sys/fs/cgroup/ ] && [ "$cg" != /sys/fs/cgroup/devices/ ]; then
		if [ "$cgmode" = v1 ]; then
			expect "v1 devices.list allows nvidia1, not nvidia0" "c 195:1 rw, 0" \
				"$(grep -x 'c 195:1 rw' "$cg/devices.list"), $(grep -c '^c 195:0 ' "$cg/devices.list")"
		fi
		r0=$(sh -c "echo \$\$ > $cg/cgroup.procs && exec $PROBE open $G/nvidia0")
		r1=$(sh -c "echo \$\$ > $cg/cgroup.procs && exec $PROBE open $G/nvidia1")
		expect "other GPU denied by the device cgroup even if it appears ($cgmode)" "EPERM ENXIO" "$r0 $r1"
	else
		ko "other GPU denied by the device cgroup even if it appears" "the sandbox's $cgmode cgroup" "${cg:-none found}"
	fi
	release gpu
	wait "$gpubox"

	echo "== MIG instance passthrough with stand-in capability nodes"
	# A MIG compute instance is its card's node plus two capability nodes, its GPU
	# instance's and its compute instance's, named by DeviceFileMinor in the driver's
	# capability files ([gpu] caps_dir, stand-ins here). The sandbox of 0/gi1/ci0 gets
	# nvidia-cap21 and nvidia-cap22; instance 0/gi2's nodes (30, 31) are absent inside,
	# cannot be made there, and the device cgroup denies them even to a process that
	# joins it from the host. The caps' major is one no driver holds (ENXIO once
	# through), read by the sandbox with stat as a real host's dynamic one would be.
	capmaj=$(awk '/^Character/ { c = 1; next } /^Block/ { c = 0 } c { print $1 }' /proc/devices |
		sort -n | awk 'BEGIN { m = 500 } $1 == m { m++ } END { print m }')
	C=$WORK/gpucaps
	mkdir -p "$G/nvidia-caps" "$C/gpu0/mig/gi1/ci0" "$C/gpu0/mig/gi2/ci0"
	for n in 21 22 30 31; do mknod "$G/nvidia-caps/nvidia-cap$n" c "$capmaj" "$n"; done
	printf 'DeviceFileMinor: 21\nDeviceFileMode: 292\nDeviceFileModify: 1\n' >"$C/gpu0/mig/gi1/access"
	printf 'DeviceFileMinor: 22\nDeviceFileMode: 292\nDeviceFileModify: 1\n' >"$C/gpu0/mig/gi1/ci0/access"
	printf 'DeviceFileMinor: 30\n' >"$C/gpu0/mig/gi2/access"
	printf 'DeviceFileMinor: 31\n' >"$C/gpu0/mig/gi2/ci0/access"
	uuid=MIG-5d8e6f2a-0c1b-5e3d-9a7f-1234567890ab
	mig() { box alice 7 --gpu 0/gi1/ci0 --gpu-uuid "$uuid" --dev-prefix "$G" --caps-dir "$C" "$@"; }
	expect "MIG: the card, the control nodes and the caps folder inside" \
		"nvidia-caps nvidia-uvm nvidia0 nvidiactl" "$(mig -- sh -c 'ls /dev | grep nvidia' | squash)"
	expect "MIG: exactly its own two capability nodes" "nvidia-cap21 nvidia-cap22" \
		"$(mig -- ls /dev/nvidia-caps | squash)"
	expect "MIG: CUDA_VISIBLE_DEVICES names the instance's uuid, NVIDIA_VISIBLE_DEVICES the host's id" \
		"$uuid 0/gi1/ci0" "$(mig -- sh -c 'echo $CUDA_VISIBLE_DEVICES $NVIDIA_VISIBLE_DEVICES')"
	expect "control MIG: its own cap nodes and card pass the device cgroup (no driver: ENXIO)" \
		"ENXIO ENXIO ENXIO" "$(mig -- sh -c "$PROBE open /dev/nvidia-caps/nvidia-cap21; $PROBE open /dev/nvidia-caps/nvidia-cap22; $PROBE open /dev/nvidia0" | squash)"
	expect "MIG: the other instance's cap node is absent inside" ENOENT \
		"$(mig -- "$PROBE" open /dev/nvidia-caps/nvidia-cap30)"
	expect "MIG: mknod of the other instance's cap node is denied" EPERM \
		"$(mig -- "$PROBE" mknoddev /tmp/cap30 "$capmaj" 30)"
	expect "control MIG mknod: host root makes the same node" OK \
		"$(hostroot "$PROBE" mknoddev /tmp/cap30 "$capmaj" 30 2>&1)"
	expect "MIG: an instance that is not in caps_dir fails the start at step devices" "125 named" \
		"$({ box alice 7 --gpu 0/gi3/ci0 --dev-prefix "$G" --caps-dir "$C" -- true; echo $?
		grep -q 'step devices: MIG instance 0/gi3 in' "$LOG" && echo named; } | squash)"
	gate mig
	mig -- sh -c "echo ready; $(held mig)" >"$WORK/mig.out" &
	migbox=$!
	cg=
	if wait_until 15 "the MIG sandbox" has_line "$WORK/mig.out" ready && init=$(box_init "$migbox"); then
		if [ "$cgmode" = v2 ]; then
			cg=/sys/fs/cgroup$(sed -n 's/^0:://p' "/proc/$init/cgroup")
		else
			cg=/sys/fs/cgroup/devices$(awk -F: '$2 ~ /(^|,)devices(,|$)/ { print $3 }' "/proc/$init/cgroup")
		fi
	fi
	if [ -n "$cg" ] && [ -e "$cg/cgroup.procs" ] && [ "$cg" != /sys/fs/cgroup/ ] && [ "$cg" != /sys/fs/cgroup/devices/ ]; then
		if [ "$cgmode" = v1 ]; then
			expect "v1 devices.list allows cap 21 and 22, not 30 or 31" "c $capmaj:21 rw, c $capmaj:22 rw, 0" \
				"$(grep -x "c $capmaj:21 rw" "$cg/devices.list"), $(grep -x "c $capmaj:22 rw" "$cg/devices.list"), $(grep -c "^c $capmaj:3[01] " "$cg/devices.list")"
		fi
		r=$(for n in 30 31 21 22; do sh -c "echo \$\$ > $cg/cgroup.procs && exec $PROBE open $G/nvidia-caps/nvidia-cap$n"; done | squash)
		expect "the other instance's cap nodes denied by the device cgroup even if they appear ($cgmode)" \
			"EPERM EPERM ENXIO ENXIO" "$r"
	else
		ko "the other instance's cap nodes denied by the device cgroup" "the sandbox's $cgmode cgroup" "${cg:-none found}"
	fi
	release mig
	wait "$migbox"
else
	skip "GPU device cgroup" "no devices controller and no cgroup v2"
fi

# the peer interface and the scratch home (peer.sh)
. "$ROOT/tests/security/peer.sh"
peer_cases
scratch_cases

# test_start starts sandboxes of its own: in this suite's state dir and cgroups
export SANDBOX_TEST_STATE_DIR=$STATE SANDBOX_TEST_CGROUP_PARENT=$CGP
sandbox_units

suite_result sandbox "$pass" "$fail" "$skipped"
