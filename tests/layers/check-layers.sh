#!/usr/bin/env bash
# check-layers.sh [ROOT] [BUILD] - enforces the include order of the code base.
#
# Each folder is a layer; a file may include headers of its own folder and of
# layers strictly below it, never of its own rank's siblings or above:
#
#   0 common (common/ + include/labd/)
#   1 config proto sandbox metrics
#   2 store
#   3 http
#   4 auth
#   5 sched
#   6 backend notify
#   7 runtime jobs
#   8 tuning
#   9 proxy api
#  10 web
#  11 supervisor
#  12 main (server/main.c)
#
# Root-side code (supervisor, proto, sandbox, common) never references the
# store or HTTP: it includes only root-side folders (common, config, proto,
# sandbox, supervisor) and, in the supervisor, web/web.h (the entry point of
# the process it forks); its object files (in BUILD, when built) may not name
# sqlite3, libmicrohttpd or store/http/auth functions. Prints each violation;
# exits 1 when there is one.
set -u
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${2:-${BUILD:-build}}
cd "$ROOT" || exit 2

# Each function below sets a variable rather than printing (no subshell per call: the
# tree has hundreds of files and over a thousand includes, and this runs at every
# make check-layers and at each planted case of tests/layers/run.sh).

# rank LAYER: its rank into r (-1: not a layer).
rank() {
	case $1 in
	common) r=0 ;;
	config | proto | sandbox | metrics) r=1 ;;
	store) r=2 ;;
	http) r=3 ;;
	auth) r=4 ;;
	sched) r=5 ;;
	backend | notify) r=6 ;;
	runtime | jobs) r=7 ;;
	tuning) r=8 ;;
	proxy | api) r=9 ;;
	web) r=10 ;;
	supervisor) r=11 ;;
	main) r=12 ;;
	*) r=-1 ;;
	esac
}

root_side() {
	case $1 in common | config | proto | sandbox | supervisor) return 0 ;; *) return 1 ;; esac
}

# The layer a source file lives in, into part.
part_of_file() {
	case $1 in
	common/* | include/labd/*) part=common ;;
	sandbox/*) part=sandbox ;;
	server/main.c) part=main ;;
	server/*/*) part=${1#server/}; part=${part%%/*} ;;
	*) part=unknown ;;
	esac
}

# The layer an include names ("labd/x.h", "sandbox/x.h", "store/x.h", "x.h"), into part.
part_of_include() {
	case $1 in
	labd/*) part=common ;;
	*/*) part=${1%%/*}; [ -d "server/$part" ] || { [ "$part" = sandbox ] || part=unknown; } ;;
	*) part=self ;;
	esac
}

bad=0
mapfile -t files < <(find common include/labd sandbox server -name '*.[ch]' | sort)
for f in "${files[@]}"; do
	part_of_file "$f"
	rank "$part"
	if [ "$r" -lt 0 ]; then
		echo "layers: $f: folder not in the layer order (add it to $0 and docs/architecture.md)"
		bad=1
	fi
done
# every include of every file at once: "FILE:LINE:#include "INC"", in the files' order
include_re='^([^:]+):([0-9]+):.*"([^"]+)"$'
while IFS= read -r hit; do
	[[ $hit =~ $include_re ]] || continue
	f=${BASH_REMATCH[1]} line=${BASH_REMATCH[2]} inc=${BASH_REMATCH[3]}
	part_of_file "$f"
	from=$part
	rank "$from"
	rf=$r
	[ "$rf" -lt 0 ] && continue # said above
	part_of_include "$inc"
	to=$part
	[ "$to" = self ] || [ "$to" = "$from" ] && continue
	rank "$to"
	rt=$r
	if root_side "$from" && ! root_side "$to" &&
	   ! { [ "$from" = supervisor ] && [ "$inc" = web/web.h ]; }; then
		echo "layers: $f:$line: root-side $from includes \"$inc\" from $to"
		bad=1
	elif [ "$rt" -lt 0 ]; then
		echo "layers: $f:$line: includes \"$inc\" from no known layer"
		bad=1
	elif [ "$rt" -ge "$rf" ]; then
		echo "layers: $f:$line: $from (layer $rf) includes \"$inc\" from $to (layer $rt)"
		bad=1
	fi
done < <(grep -HnoE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[^"]+"' "${files[@]}")

# Root-side objects: no store, HTTP or auth symbols, directly.
forbidden='^(sqlite3_|MHD_|db_|users_|sessions_|tokens_|audit_|throttle_|runtimes_|jobs_|migrations_|http_|auth_|api_|routes_|proxy_|gate_|upstream_|wsrelay_|waker_|password_)'
for dir in common sandbox server/supervisor server/proto; do
	[ -d "$BUILD/$dir" ] || continue
	for o in "$BUILD/$dir"/*.o; do
		[ -e "$o" ] || continue
		syms=$(nm -u "$o" 2>/dev/null | awk '{print $2}' | grep -E "$forbidden")
		if [ -n "$syms" ]; then
			echo "layers: ${o#"$BUILD"/}: root-side code references $(echo $syms | tr ' ' ',')"
			bad=1
		fi
	done
done

if [ "$bad" -eq 0 ]; then
	echo "layers: ok"
fi
exit "$bad"
