# tests/security/peer.sh - the peer interface (--peer-addr/--peers/--peer-via) and the
# scratch home, sourced by run.sh (its helpers: box, expect, gate, held, release).
#
# Three test-made "hosts" on one bridge, each a network namespace with an address in
# 198.18.93.0/24 (nothing else is ever addressed): A (.1) and B (.2) run one sandbox
# each, with peer0 at .11 and .12, each the other's only peer; C (.3) is a host that is
# no peer.  B's sandbox has egress through pasta (whose eth0 takes B's own address and
# prefix) with the whole bridge's network denied, A's has none: they reach each other
# by TCP both ways; A's reaches neither C, nor A itself, nor B the host; C cannot reach
# A's sandbox; the user inside cannot flush the rules nor take peer0 down.

PEER_NET=198.18.93
# nsenter, not ip netns exec: that mounts a /sys of the namespace's own, without cgroups
peer_ns() { nsenter --net="/run/netns/lp$$-$1" -- "${@:2}"; }
peer_cleanup() {
	for n in a b c sw; do ip netns del "lp$$-$n" 2>/dev/null; done
}
peer_setup() {
	local n i=1
	ip netns add "lp$$-sw" && ip -n "lp$$-sw" link add br0 type bridge && ip -n "lp$$-sw" link set br0 up || return 1
	for n in a b c; do
		ip netns add "lp$$-$n" &&
			ip -n "lp$$-$n" link add "v$n" type veth peer name "p$n" netns "lp$$-sw" &&
			ip -n "lp$$-sw" link set "p$n" master br0 up &&
			ip -n "lp$$-$n" addr add "$PEER_NET.$i/24" dev "v$n" &&
			ip -n "lp$$-$n" link set "v$n" up && ip -n "lp$$-$n" link set lo up &&
			# a default route: pasta configures the sandbox after the host's
			ip -n "lp$$-$n" route add default via "$PEER_NET.254" || return 1
		i=$((i + 1))
	done
}

# peer.py NAME LISTEN_PORT PEER PEER_PORT [PROBES...] GATE: listens on LISTEN_PORT,
# connects to PEER:PEER_PORT until it answers, then once to each ADDR:PORT probe, then
# waits for GATE and says how many connections it accepted.
cat >"$WORK/peer.py" <<'EOF'
import socket, subprocess, sys, threading, time
name, lport, peer, pport, probes, gate = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5:-1], sys.argv[-1]
accepted = 0
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", lport))
srv.listen(8)
def serve():
    global accepted
    while True:
        c, _ = srv.accept()
        accepted += 1
        c.sendall(name.encode())
        c.close()
threading.Thread(target=serve, daemon=True).start()
print("ready", flush=True)
def connect(addr, port, timeout):
    try:
        with socket.create_connection((addr, port), timeout=timeout) as s:
            return "ok:" + s.recv(16).decode()
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return e.__class__.__name__
got, until = "none", time.time() + 20
while not got.startswith("ok") and time.time() < until:
    got = connect(peer, pport, 1)
    if not got.startswith("ok"):
        time.sleep(0.1)
print("peer", got, flush=True)
for p in probes:
    a, port = p.split(":")
    print(p, connect(a, int(port), 1.5), flush=True)
if probes:
    for cmd in (["nft", "flush", "ruleset"], ["ip", "link", "set", "peer0", "down"]):
        r = subprocess.run(cmd, capture_output=True)
        print(" ".join(cmd[:2]), "denied" if r.returncode else "done", flush=True)
with open(gate) as g:
    g.read()
print("accepted", accepted, flush=True)
EOF

# listen_in NS PORT: a plain listener on a host of the bridge, for as long as the case
listen_in() { peer_ns "$1" python3 -c 'import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(8)
while True: s.accept()[0].close()' "$2" & }

peer_cases() {
	local abox bbox pids="" r
	echo "== the peer interface (test-made namespaces on one bridge, $PEER_NET.0/24)"
	mkdir -p "$STATE"
	if ! peer_setup; then
		peer_cleanup
		skip "the peer interface" "cannot make network namespaces, a bridge or veths here"
		return
	fi
	listen_in a 5003; pids="$pids $!"
	listen_in b 5004; pids="$pids $!"
	listen_in c 5001; pids="$pids $!"
	gate peerend
	gate peerend2
	peer_ns b "$LABBOX" run --user bob --user-id 8 --uid-base 200000 --state-dir "$STATE" \
		--cgroup-parent "$CGP" --net egress --net-deny "$PEER_NET.0/24" \
		--peer-addr "$PEER_NET.12" --peers "$PEER_NET.11" \
		--peer-via "$PEER_NET.2" -- python3 "$WORK/peer.py" b 5000 "$PEER_NET.11" 5002 \
		"$WORK/gate.peerend2" >"$WORK/peer-b.out" 2>"$WORK/peer-b.err" &
	bbox=$!
	peer_ns a "$LABBOX" run --user alice --user-id 7 --uid-base 200000 --state-dir "$STATE" \
		--cgroup-parent "$CGP" --peer-addr "$PEER_NET.11" --peers "$PEER_NET.12" \
		--peer-via "$PEER_NET.1" -- python3 "$WORK/peer.py" a 5002 "$PEER_NET.12" 5000 \
		"$PEER_NET.3:5001" "$PEER_NET.1:5003" "$PEER_NET.2:5004" \
		"$WORK/gate.peerend" >"$WORK/peer-a.out" 2>"$WORK/peer-a.err" &
	abox=$!
	if wait_until 30 "both peer sandboxes' tests" has_line "$WORK/peer-a.out" "ip link denied"; then
		expect "peer0: A's sandbox reaches B's (TCP)" "ok:b" "$(sed -n 's/^peer //p' "$WORK/peer-a.out")" ||
			sed 's/^/    B: /' "$WORK/peer-b.out" "$WORK/peer-b.err"
		wait_until 20 "B's sandbox to reach A's" grep -q '^peer ' "$WORK/peer-b.out"
		expect "peer0: B's sandbox reaches A's (TCP)" "ok:a" "$(sed -n 's/^peer //p' "$WORK/peer-b.out")"
		expect "peer0: a host on the bridge that is no peer is unreachable" timeout \
			"$(sed -n "s/^$PEER_NET.3:5001 //p" "$WORK/peer-a.out")"
		expect "peer0: the node's own address is unreachable" timeout \
			"$(sed -n "s/^$PEER_NET.1:5003 //p" "$WORK/peer-a.out")"
		expect "peer0: the peer's node (not a peer itself) is unreachable" timeout \
			"$(sed -n "s/^$PEER_NET.2:5004 //p" "$WORK/peer-a.out")"
		expect "peer0: the user cannot flush the rules (nft flush ruleset)" denied \
			"$(sed -n 's/^nft flush //p' "$WORK/peer-a.out")"
		expect "peer0: the user cannot take peer0 down" denied \
			"$(sed -n 's/^ip link //p' "$WORK/peer-a.out")"
		r=$(peer_ns c python3 -c 'import socket,sys
try:
    socket.create_connection((sys.argv[1], 5002), timeout=1.5).close(); print("ok")
except socket.timeout: print("timeout")
except OSError as e: print(e.__class__.__name__)' "$PEER_NET.11")
		expect "peer0: a host that is no peer cannot reach the sandbox" timeout "$r"
	else
		ko "peer0: both sandboxes run their tests" "ip link denied" \
			"$(cat "$WORK/peer-a.out" "$WORK/peer-a.err" 2>/dev/null | squash)"
	fi
	release peerend2
	release peerend
	wait "$bbox" "$abox"
	# A accepted B's connection only (C's never arrived)
	expect "peer0: A's sandbox accepted exactly B's connection" "accepted 1" \
		"$(grep '^accepted' "$WORK/peer-a.out")"
	for p in $pids; do kill "$p" 2>/dev/null; done
	wait $pids 2>/dev/null
	peer_cleanup
	box alice 7 --peer-addr "$PEER_NET.11" --peers "$PEER_NET.11" --peer-via "$PEER_NET.1" -- /bin/true
	expect "peer0: peers holding the sandbox's own address refused" "failed: peers: holds peer_addr itself" \
		"$([ $? -ne 0 ] && echo failed):$(grep -o ' peers: holds peer_addr itself' "$LOG" | head -1)"
}

scratch_cases() {
	echo "== the scratch home"
	local r
	r=$(box alice 7 --scratch-home --mem 64M -- sh -c 'echo hi > ~/f && stat -c "%u %a" ~ && cat ~/f && df --output=fstype ~ | tail -1' | squash)
	expect "--scratch-home: /home/alice is the user's own empty tmpfs" "1000 700 hi tmpfs" "$r"
	expect "--scratch-home: nothing left after the sandbox" "" "$(ls "$STATE/scratch" 2>/dev/null)"
	expect "--scratch-home: no mount left" "" "$(grep " $STATE/scratch" /proc/self/mountinfo)"
}
