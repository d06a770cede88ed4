# The capability sets the deployments grant, as each source states them; sourced
# by the deploy tests. Every function prints one upper-case name a line
# (CAP_ prefix, sorted, unique), nothing when it finds none: the caller checks
# that a set is not empty, so a parser that stops matching fails the test.

# caps_norm: words on stdin (CAP_X, cap_x or Kubernetes' X) to the sorted set.
caps_norm() {
	tr -s ' \t,' '\n\n\n' | tr '[:lower:]' '[:upper:]' | sed -n 's/^\(CAP_\)\{0,1\}\([A-Z_]\{2,\}\)$/CAP_\2/p' | sort -u
}

# docs_section9 DOC: docs/security.md's section 9 ("Least privilege") alone.
docs_section9() {
	awk '/^## 9\. /{on=1; next} /^## /{on=0} on' "$1"
}

# caps_doc_kept DOC: the first column of section 9's table "What is kept".
caps_doc_kept() {
	docs_section9 "$1" | awk '/^### What is kept/{on=1; next} /^### /{on=0} on' |
		sed -n 's/^| `\(CAP_[A-Z_]*\)` |.*/\1/p' | caps_norm
}

# caps_doc_load DOC: the capabilities in the bold heads of the bullets under
# "Needed only to load, then dropped".
caps_doc_load() {
	docs_section9 "$1" | awk '/^### Needed only to load/{on=1; next} /^### /{on=0} on' |
		sed -n 's/^- \*\*\([^*]*\)\*\*.*/\1/p' | grep -o 'CAP_[A-Z_]*' | caps_norm
}

# caps_doc_unit DOC: the CapabilityBoundingSet= that section 9's "The unit" quotes.
caps_doc_unit() {
	docs_section9 "$1" | sed -n 's/.*`CapabilityBoundingSet=\([A-Z_ ]*\)`.*/\1/p' | caps_norm
}

# caps_privs PRIVS_C: what agent/lib/privs.c keeps: its kept[] array, OVERRIDE and setid[].
caps_privs() {
	{
		awk '/^static const unsigned int kept\[\]/{on=1; next} on && /^};/{on=0} on' "$1" |
			grep -o '^[[:space:]]*CAP_[A-Z_]*'
		sed -n 's/^#define OVERRIDE[[:space:]]*\(CAP_[A-Z_]*\).*/\1/p' "$1"
		sed -n 's/^static const unsigned int setid\[\] = {\(.*\)};/\1/p' "$1"
	} | caps_norm
}

# caps_unit UNIT: the union of the unit's CapabilityBoundingSet= lines.
caps_unit() {
	sed -n 's/^CapabilityBoundingSet=//p' "$1" | caps_norm
}

# same_set WHAT A B: both sets (newline lists) equal and not empty; says the difference.
same_set() {
	local what=$1 a=$2 b=$3
	if [ -z "$a" ] || [ -z "$b" ]; then
		say "    $what: a set is empty: [$(echo $a)] [$(echo $b)]"
		return 1
	fi
	if [ "$a" != "$b" ]; then
		say "    $what: only in the first: $(comm -23 <(echo "$a") <(echo "$b") | tr '\n' ' ')"
		say "    $what: only in the second: $(comm -13 <(echo "$a") <(echo "$b") | tr '\n' ' ')"
		return 1
	fi
}

# caps_doc_profile README: the first column of deploy/README.md's table under
# "### The profiler's capabilities" (the DaemonSet's profile container and
# perfmapd-profile.service grant that set).
caps_doc_profile() {
	awk '/^### The profiler.s capabilities/{on=1; next} /^#/{on=0} on' "$1" |
		sed -n 's/^| `\(CAP_[A-Z_]*\)` |.*/\1/p' | caps_norm
}
