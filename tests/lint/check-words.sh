#!/usr/bin/env bash
# tests/lint/check-words.sh ROOT BUILD [KNOWN] - the naming rules of docs/architecture.md
# ("Words") that a program can check:
#   guard   no include guard used by two headers
#   tag     no struct, union or enum tag defined twice across server/ and include/
#   prefix  no exported prefix shared by two folders (from nm on BUILD's objects; the
#           prefix of a global function is its object file's name when the function's
#           name starts with it, else the name's first word)
#   period  every #define named *_INTERVAL*, *_EVERY*, *_PERIOD*, *_TICK* or *_TIMEOUT*
#           ends in its unit: _MS, _S, _US or _NS (an include guard, *_H, is none)
# KNOWN (default ROOT/tests/lint/known-words.txt) lists today's violations, one a line:
#   KIND NAME PLACE... -- why it is still there
# A violation not in it fails, and so does a line whose violation is gone (the list only
# shrinks). Prints "words: ok" when clean; tests/lint/run.sh proves each check fails.
set -u
ROOT=${1:?usage: check-words.sh ROOT BUILD [KNOWN]}
BUILD=${2:?usage: check-words.sh ROOT BUILD [KNOWN]}
KNOWN=${3:-$ROOT/tests/lint/known-words.txt}
cd "$ROOT" || exit 2

# Each finder prints "KIND NAME PLACE PLACE..." (places sorted) for each violation.
sources() { # the C files of the given folders, relative to ROOT
	find "$@" -type f \( -name '*.c' -o -name '*.h' \) 2>/dev/null | sort
}

dups() { # stdin "NAME PLACE" pairs: "KIND NAME PLACES" for a NAME with two or more
	sort -u | awk -v k="$1" '
		{ n[$1]++; p[$1] = p[$1] " " $2 }
		END { for (x in n) if (n[x] > 1) print k " " x p[x] }' | sort
}

# (each finder runs one grep or one nm over all its files: no program per file, as this
# runs at every make lint and at each planted case of tests/lint/run.sh)
find_guards() {
	local h
	local -a headers=()
	for h in $(sources common include sandbox server); do
		case $h in *.h) headers+=("$h") ;; esac
	done
	[ ${#headers[@]} -gt 0 ] || return 0
	# -m1: each header's first #ifndef, "HEADER:#ifndef GUARD ..."
	grep -m1 -HE '^#[[:space:]]*ifndef[[:space:]]+[A-Za-z_]' "${headers[@]}" |
		awk '{ i = index($0, ":"); split(substr($0, i + 1), w); if (w[2] != "") print w[2], substr($0, 1, i - 1) }' |
		dups guard
}

S='[[:space:]]'
ID='[A-Za-z_][A-Za-z0-9_]*'

# A tag defined twice in one file counts too (the place is named twice).
find_tags() {
	local tag="^$S*((typedef|static|const|extern)$S+)*(struct|union|enum)$S+($ID)$S*\\{"
	sources include server | xargs grep -HnE "$tag" |
		sed -E "s/^([^:]*):[0-9]+:$S*((typedef|static|const|extern)$S+)*(struct|union|enum)$S+($ID).*/\\5 \\1/" |
		awk '{ n[$1]++; p[$1] = p[$1] " " $2 }
		     END { for (x in n) if (n[x] > 1) print "tag " x p[x] }' | sort
}

find_prefixes() {
	local o b
	local -a objs=()
	for o in $(find "$BUILD"/{common,sandbox,server} -name '*.o' 2>/dev/null | sort); do
		b=${o#"$BUILD"/}
		[ "${b%/*}" = server ] && continue # main.c: the program, no module
		# an object left in BUILD by a file since renamed or removed is no module
		[ -e "$ROOT/${b%.o}.c" ] || continue
		objs+=("$o")
	done
	[ ${#objs[@]} -gt 0 ] || return 0
	# -A: each symbol line is "OBJECT:ADDRESS T NAME"; the folder and the object's name
	# from OBJECT
	nm -A -g --defined-only "${objs[@]}" | awk -v build="$BUILD/" '$2 == "T" {
		o = $1; sub(/:[^:]*$/, "", o)
		if (index(o, build) == 1) o = substr(o, length(build) + 1)
		d = o; sub(/\/[^\/]*$/, "", d)
		b = o; sub(/^.*\//, "", b); sub(/\.o$/, "", b)
		n = $3
		if (index(n, b "_") == 1) print b, d
		else if (index(n, "_") > 1) print substr(n, 1, index(n, "_") - 1), d
	}' | dups prefix
}

find_periods() {
	local def="^$S*#$S*define$S+[A-Za-z0-9_]*_(INTERVAL|EVERY|PERIOD|TICK|TIMEOUT)[A-Za-z0-9_]*"
	sources common include sandbox server | xargs grep -HnoE "$def" |
		sed -E "s/^([^:]*):[0-9]+:.*define$S+([A-Za-z0-9_]+)\$/\\2 \\1/" |
		grep -vE '^[A-Za-z0-9_]+_(MS|S|US|NS|H) ' | awk '{ print "period " $1 " " $2 }' | sort
}

if ! find "$BUILD/server" -name '*.o' 2>/dev/null | grep -q .; then
	echo "words: no objects under $BUILD/server (run make tests)" >&2
	exit 1
fi

found=$( { find_guards; find_tags; find_prefixes; find_periods; } )
known=$(grep -vE '^[[:space:]]*(#|$)' "$KNOWN" 2>/dev/null | sed -E 's/[[:space:]]+--.*$//; s/[[:space:]]+/ /g')
bad=0
what() {
	case $1 in
	guard) echo "include guard $2 used by" ;;
	tag) echo "tag $2 defined in" ;;
	prefix) echo "exported prefix ${2}_ in" ;;
	period) echo "period $2 has no unit (_MS, _S, _US, _NS) in" ;;
	esac
}
while read -r kind name places; do
	[ -n "$kind" ] || continue
	grep -qxF "$kind $name $places" <<<"$known" && continue
	echo "words: $(what "$kind" "$name") $places"
	bad=1
done <<<"$found"
lineno=0
while IFS= read -r line; do
	lineno=$((lineno + 1))
	entry=$(sed -E 's/[[:space:]]+--.*$//; s/[[:space:]]+/ /g' <<<"$line")
	case $entry in '' | '#'*) continue ;; esac
	grep -qxF "$entry" <<<"$found" && continue
	echo "words: ${KNOWN#"$ROOT"/}:$lineno: \"$entry\" is gone: remove the line"
	bad=1
done <"$KNOWN"
[ $bad -eq 0 ] && echo "words: ok"
exit $bad
