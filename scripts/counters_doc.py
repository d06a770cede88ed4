#!/usr/bin/env python3
"""perfmapd's counter table (perfmap/include/perfmapd_counters.def) in the docs.

    counters_doc.py [TOP]          write the tables between the markers in
                                   docs/agent.md and the list in man/perfmapctl.8
                                   (make docs-counters)
    counters_doc.py --check [TOP]  fail when they are stale, or when the docs, the
                                   man pages or deploy/ name a status key or a
                                   metric the table lacks (make counters-test)

The table is read as the C preprocessor would see its rows: PERFMAPD_*(...)
calls, strings and expressions as arguments. Which keys the docs name: the
first column of the tables under a heading that says "status", the keys of
`perfmapctl status --all` examples, what `jq` or `grep` take from `perfmapctl
status`, and every perfmapd_* metric name anywhere. A grep of the default
status text (a summary for a person) is an error too: scripts read --all or
--json.
"""
import os
import re
import sys

DEF = "perfmap/include/perfmapd_counters.def"
AGENT_MD = "docs/agent.md"
CTL_MAN = "man/perfmapctl.8"
OWNERS = ("VALUE", "POLICY", "ARCHIVE", "MIRROR", "HOLDS", "LOOP", "JITDUMP")
ROW_FIELDS = ("key", "source", "group", "type", "unit", "flags", "family", "label", "summary", "help")
MARK = {
    "status": ("<!-- counters: status keys, written by `make docs-counters` from "
               "perfmap/include/perfmapd_counters.def -->", "<!-- counters: end of status keys -->"),
    "metrics": ("<!-- counters: metrics, written by `make docs-counters` from "
                "perfmap/include/perfmapd_counters.def -->", "<!-- counters: end of metrics -->"),
    "man": ('.\\" counters: status keys, written by make docs-counters from '
            'perfmap/include/perfmapd_counters.def', '.\\" counters: end of status keys'),
}



def string_end(text, i):
    """The index past the C string literal whose opening quote is at @i."""
    j = i + 1
    while text[j] != '"':
        j += 2 if text[j] == "\\" else 1
    return j + 1

def fail(msg):
    print("counters: FAIL %s" % msg)
    return 1


# ---- the table ----

def strip_c(text):
    """The text without comments and preprocessor lines; strings kept whole."""
    out, i, n = [], 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and text[i:].lstrip(" \t").startswith("#"):
            j = text.find("\n", i)
            while j != -1 and text[j - 1] == "\\":
                j = text.find("\n", j + 1)
            i = n if j == -1 else j
            continue
        if text.startswith("/*", i):
            i = text.index("*/", i) + 2
            continue
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i == -1 else i
            continue
        if c == '"':
            j = string_end(text, i)
            out.append(text[i:j])
            i = j
            at_line_start = False
            continue
        out.append(c)
        at_line_start = c == "\n" or (at_line_start and c in " \t")
        i += 1
    return "".join(out)


def unquote(arg):
    if arg.startswith('"'):
        return bytes(arg[1:-1], "utf-8").decode("unicode_escape")
    return arg


def split_args(text, start):
    """The arguments of the call whose "(" is at @start, and the index past its ")"."""
    args, depth, cur, i = [], 0, [], start + 1
    while True:
        c = text[i]
        if c == '"':
            j = string_end(text, i)
            cur.append(text[i:j])
            i = j
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                args.append("".join(cur).strip())
                return [unquote(" ".join(a.split())) for a in args], i + 1
            depth -= 1
        elif c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1


def load(top):
    text = strip_c(open(os.path.join(top, DEF)).read())
    table = {"groups": [], "rows": [], "families": [], "lists": []}
    for m in re.finditer(r"\bPERFMAPD_([A-Z]+)\s*\(", text):
        args, _ = split_args(text, m.end() - 1)
        kind = m.group(1)
        if kind in OWNERS:
            row = dict(zip(ROW_FIELDS, args))
            row["owner"] = kind
            row["problem"] = "PMC_PROBLEM" in row["flags"]
            table["rows"].append(row)
        elif kind == "FAMILY":
            table["families"].append(dict(zip(("name", "type", "label", "samples", "help"), args)))
        elif kind == "GROUP":
            table["groups"].append(dict(zip(("id", "name", "title"), args)))
        elif kind == "LIST":
            table["lists"].append(dict(zip(("prefix", "group", "doc", "help"), args)))
        else:
            raise SystemExit("counters: %s: unknown row PERFMAPD_%s" % (DEF, kind))
    return table


# ---- what is written ----

UNITS = {"NONE": "", "BYTES": "bytes", "SECONDS": "s", "MS": "ms", "NS": "ns", "BOOL": ""}
WHEN = {"PMC_IF_MIRRORS": "while mirroring", "PMC_IF_EXECMAP": "with mmap reports",
        "PMC_IF_JITSCAN": "with /proc scans", "PMC_IF_SET": "when not empty"}


def cell(s):
    return s.replace("|", "\\|")


def metric_of(row, families):
    if row["family"] == "NONE":
        return ""
    fam = families[row["family"]]
    if row["label"]:
        return '`%s{%s="%s"}`' % (row["family"], fam["label"], row["label"])
    return "`%s`" % row["family"]


def type_of(row):
    t = "flag" if row["unit"] == "BOOL" else row["type"].lower()
    unit = UNITS[row["unit"]]
    when = [w for f, w in WHEN.items() if f in row["flags"]]
    words = t + (" (%s)" % unit if unit else "")
    if row["problem"]:
        words += ", **problem**"
    if when:
        words += ", " + ", ".join(when)
    return words


def status_tables(t):
    families = {f["name"]: f for f in t["families"]}
    out = []
    for g in t["groups"]:
        out += ["", "#### %s (`%s`)" % (g["title"], g["name"]), "",
                "| key | type | metric | meaning |", "|---|---|---|---|"]
        for r in t["rows"]:
            if r["group"] == g["id"]:
                out.append("| `%s` | %s | %s | %s |" % (r["key"], type_of(r), metric_of(r, families),
                                                       cell(r["help"])))
        for l in t["lists"]:
            if l["group"] == g["id"]:
                out.append("| `%s` | list | | %s |" % (l["doc"], cell(l["help"])))
    return out + [""]


def metrics_table(t):
    out = ["", "| metric | type | meaning | samples: the status key each mirrors |", "|---|---|---|---|"]
    for f in t["families"]:
        rows = [r for r in t["rows"] if r["family"] == f["name"]]
        name = "`%s{%s}`" % (f["name"], f["label"]) if f["label"] and f["label"] != "le" else "`%s`" % f["name"]
        if rows and f["label"]:
            samples = ", ".join("`%s` (`%s`)" % (r["label"], r["key"]) for r in rows)
        elif rows:
            samples = ", ".join("`%s`%s" % (r["key"], " in ms" if r["unit"] == "MS" else "")
                                for r in rows)
        else:
            samples = "the endpoint's own"
        out.append("| %s | %s | %s | %s |" % (name, f["type"].lower(), cell(f["help"]), samples))
    return out + [""]


def man_list(t):
    out = [".PP",
           "The keys, by group (the",
           ".B \\-\\-all",
           "titles); those in bold are problems, listed by the summary when they are not 0.",
           "docs/agent.md says what each counts."]
    for g in t["groups"]:
        keys = []
        # "\\%": groff never hyphenates the key.
        for r in t["rows"]:
            if r["group"] == g["id"]:
                keys.append("\\fB\\%%%s\\fR" % r["key"] if r["problem"] else "\\%" + r["key"])
        for l in t["lists"]:
            if l["group"] == g["id"]:
                keys.append("\\%" + l["doc"])
        out += [".TP", ".I %s" % g["name"], ", ".join(keys) + "."]
    return out


def splice(text, marks, lines, path):
    begin, end = marks
    if text.count(begin) != 1 or text.count(end) != 1:
        raise SystemExit("counters: %s: the markers %r and %r must be there once each" % (path, begin, end))
    a = text.index(begin) + len(begin)
    b = text.index(end)
    return text[:a] + "\n" + "\n".join(lines).strip("\n") + "\n" + text[b:]


def generate(top, t):
    """{path: (old text, new text)} for the files with generated parts."""
    out = {}
    path = os.path.join(top, AGENT_MD)
    old = open(path).read()
    new = splice(old, MARK["status"], status_tables(t), AGENT_MD)
    new = splice(new, MARK["metrics"], metrics_table(t), AGENT_MD)
    out[path] = (old, new)
    path = os.path.join(top, CTL_MAN)
    old = open(path).read()
    out[path] = (old, splice(old, MARK["man"], man_list(t), CTL_MAN))
    return out


# ---- what the docs name ----

def doc_files(top):
    names = [os.path.join("docs", f) for f in sorted(os.listdir(os.path.join(top, "docs"))) if f.endswith(".md")]
    names += ["README.md", "man/perfmapd.8", "man/perfmapctl.8"]
    for dirpath, _, files in os.walk(os.path.join(top, "deploy")):
        for f in sorted(files):
            if f.endswith((".md", ".yml", ".yaml", ".json", ".rules", ".conf", ".service")):
                names.append(os.path.relpath(os.path.join(dirpath, f), top))
    return names


class Known:
    def __init__(self, t):
        self.keys = {r["key"] for r in t["rows"]}
        self.lists = t["lists"]
        self.metrics = set()
        for f in t["families"]:
            self.metrics.add(f["name"])
            if f["type"] == "HISTOGRAM":
                self.metrics |= {f["name"] + s for s in ("_bucket", "_sum", "_count")}

    def key(self, word):
        """Whether @word is a key, a list's (jit_<pid>, jit_4242) or a prefix of keys (copies_, refused_*)."""
        if word in self.keys:
            return True
        for l in self.lists:
            if word == l["doc"] or re.fullmatch(re.escape(l["prefix"]) + r"(\d+|<[^>]*>)", word):
                return True
        stem = word.rstrip("*")
        if stem != word or word.endswith("_"):
            return any(k.startswith(stem) for k in self.keys)
        return False


def text_of(path, text):
    """man's escapes and fonts undone."""
    if path.endswith(".8"):
        text = re.sub(r"\\f[BIRP]", "", text).replace("\\-", "-").replace("\\&", "").replace("\\%", "")
    return text


def named_keys(path, text):
    """(line, key or prefix, why) that @text names as status keys."""
    found = []
    heading = ""
    in_status_example = False
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            heading = line.lower()
        # The first column of a table under a status heading: `key`, `key1`, `key2`.
        if "status" in heading and line.startswith("| `"):
            first = line.split(" | ")[0]
            for w in re.findall(r"`([a-z][a-z0-9_]*(?:\*|<[^>]*>)?)`", first):
                found.append((n, w, "a status table's key"))
        if "perfmapctl status" in line and "perfmapctl" in line:
            cmd = line[line.index("perfmapctl status"):]
            for w in re.findall(r"jq[^|]*?((?:\.[a-z][a-z0-9_]*,?)+)", cmd):
                for k in re.findall(r"\.([a-z][a-z0-9_]*)", w):
                    found.append((n, k, "jq reads it"))
            for g in re.findall(r"grep\s+(?:-[a-zA-Z]+\s+)*['\"]?([^'\"|)]+)", cmd):
                words = re.findall(r"[a-z][a-z0-9]*_[a-z0-9_]*", g)
                for k in words:
                    found.append((n, k, "grep reads it"))
                status_args = cmd.split("|")[0]
                if words and "--all" not in status_args and "--json" not in status_args:
                    found.append((n, None, "greps `perfmapctl status` without --all: "
                                           "the default is a summary for a person"))
            in_status_example = line.lstrip().startswith(("$", "#")) and "--all" in cmd
            continue
        if in_status_example:
            if line.lstrip().startswith(("$", "```", "# ")) or not line.strip():
                in_status_example = False
            else:
                m = re.match(r"([a-z][a-z0-9_]*): ", line)
                if m:
                    found.append((n, m.group(1), "an example of --all shows it"))
    return found


def check_docs(top, known):
    errors = []
    for rel in doc_files(top):
        path = os.path.join(top, rel)
        if not os.path.exists(path):
            continue
        text = text_of(rel, open(path).read())
        for n, word, why in named_keys(rel, text):
            if word is None:
                errors.append("%s:%d: %s" % (rel, n, why))
            elif not known.key(word):
                errors.append("%s:%d: `%s` (%s) is no status key of %s" % (rel, n, word, why, DEF))
        for n, line in enumerate(text.splitlines(), 1):
            for m in re.findall(r"\b(perfmapd_[a-z0-9_]+|process_[a-z_]+_(?:total|bytes|fds|seconds))\b(?![.(])",
                                line):
                if m not in known.metrics:
                    errors.append("%s:%d: metric `%s` is not in %s" % (rel, n, m, DEF))
    return errors


def check_both_ways(top, t, known):
    """Every key and metric of the table in docs/agent.md, every key in perfmapctl.8."""
    errors = []
    agent = open(os.path.join(top, AGENT_MD)).read()
    man = text_of(CTL_MAN, open(os.path.join(top, CTL_MAN)).read())
    for r in t["rows"]:
        if "`%s`" % r["key"] not in agent:
            errors.append("%s: status key `%s` is not there" % (AGENT_MD, r["key"]))
        if not re.search(r"(?<![a-z0-9_])%s(?![a-z0-9_])" % re.escape(r["key"]), man):
            errors.append("%s: status key %s is not there" % (CTL_MAN, r["key"]))
    for f in t["families"]:
        if "`%s" % f["name"] not in agent:
            errors.append("%s: metric `%s` is not there" % (AGENT_MD, f["name"]))
    return errors


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    top = args[0] if args else "."
    t = load(top)
    if len(t["rows"]) < 100 or len(t["families"]) < 40 or not t["groups"]:
        return fail("%s read as %d rows, %d families: the parser lost them" %
                    (DEF, len(t["rows"]), len(t["families"])))
    files = generate(top, t)
    if not check:
        for path, (old, new) in files.items():
            if old != new:
                with open(path, "w") as f:
                    f.write(new)
                print("counters: wrote %s" % os.path.relpath(path, top))
        return 0
    errors = ["%s: the generated part is stale: run `make docs-counters`" % os.path.relpath(p, top)
              for p, (old, new) in files.items() if old != new]
    known = Known(t)
    errors += check_docs(top, known)
    errors += check_both_ways(top, t, known)
    for e in errors:
        fail(e)
    if errors:
        return 1
    print("counters: ok, %d status keys and %d metrics in the docs and the man page, as %s has them"
          % (len(t["rows"]), len(t["families"]), DEF))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
