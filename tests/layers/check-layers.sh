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

rank() {
	case $1 in
	common) echo 0 ;;
	config | proto | sandbox | metrics) echo 1 ;;
	store) echo 2 ;;
	http) echo 3 ;;
	auth) echo 4 ;;
	sched) echo 5 ;;
	backend | notify) echo 6 ;;
	runtime | jobs) echo 7 ;;
	tuning) echo 8 ;;
	proxy | api) echo 9 ;;
	web) echo 10 ;;
	supervisor) echo 11 ;;
	main) echo 12 ;;
	*) echo -1 ;;
	esac
}

root_side() {
	case $1 in common | config | proto | sandbox | supervisor) return 0 ;; *) return 1 ;; esac
}

# The layer a source file lives in.
part_of_file() {
	case $1 in
	common/* | include/labd/*) echo common ;;
	sandbox/*) echo sandbox ;;
	server/main.c) echo main ;;
	server/*/*) p=${1#server/}; echo "${p%%/*}" ;;
	*) echo unknown ;;
	esac
}

# The layer an include names ("labd/x.h", "sandbox/x.h", "store/x.h", "x.h").
part_of_include() {
	case $1 in
	labd/*) echo common ;;
	*/*) p=${1%%/*}; [ -d "server/$p" ] && echo "$p" || { [ "$p" = sandbox ] && echo sandbox || echo unknown; } ;;
	*) echo self ;;
	esac
}

bad=0
while IFS= read -r f; do
	from=$(part_of_file "$f")
	rf=$(rank "$from")
	if [ "$rf" -lt 0 ]; then
		echo "layers: $f: folder not in the layer order (add it to $0 and docs/architecture.md)"
		bad=1
		continue
	fi
	while IFS=: read -r line inc; do
		to=$(part_of_include "$inc")
		[ "$to" = self ] || [ "$to" = "$from" ] && continue
		rt=$(rank "$to")
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
	done < <(grep -noE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[^"]+"' "$f" |
		 sed -E 's/^([0-9]+):.*"([^"]+)"/\1:\2/')
done < <(find common include/labd sandbox server -name '*.[ch]' | sort)

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
