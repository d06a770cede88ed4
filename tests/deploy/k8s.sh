#!/usr/bin/env bash
# make k8s-test: deploy/kubernetes/*.yaml validate against the Kubernetes API
# schema (npm kubernetes-models, installed by make into NPM_DIR from
# tests/deploy/package-lock.json), a deliberately broken copy does not (the
# validator is really at work), the DaemonSet has what deploy/README.md
# promises, and it grants exactly the capabilities docs/security.md section 9
# documents (the parser of make unit-file-test). No root, no cluster.
#
#   tests/deploy/k8s.sh NPM_DIR
set -u
NPM_DIR=$(cd "${1:?usage: k8s.sh NPM_DIR}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
WORK=$(mktemp -d /var/tmp/pmk8s.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
. "$HERE/../agent/lib.sh"
. "$HERE/caps.sh"

K8S=$TOP/deploy/kubernetes
command -v node >/dev/null || { say "FAIL: node is missing (make deps)"; exit 1; }
[ -d "$NPM_DIR/node_modules/kubernetes-models" ] || { say "FAIL: $NPM_DIR has no kubernetes-models (make npm-deps)"; exit 1; }
# The modules resolve from NPM_DIR's node_modules.
validate() { (cd "$NPM_DIR" && node "$HERE/validate.mjs" "$@"); }

files=("$K8S"/*.yaml)
kinds=$(cat "${files[@]}" | sed -n 's/^kind: *//p' | sort | tr '\n' ' ')
check "deploy/kubernetes holds a ConfigMap, a DaemonSet, a Namespace and a ServiceAccount ($kinds)" \
	test "$kinds" = "ConfigMap DaemonSet Namespace ServiceAccount "
out=$(validate "${files[@]}")
rc=$?
say "$out" | sed 's/^/    /'
check "every object validates against the Kubernetes API schema" \
	eval '[ $rc -eq 0 ] && [ "$(grep -c "^ok " <<<"$out")" -eq 4 ]'

# The negative control: a wrong type and an unknown field must be refused.
sed 's/^      hostPID: true/      hostPID: "yes"/; s/containerPort: 9848/containerPort: "metrics"/' \
	"$K8S/daemonset.yaml" >"$WORK/broken.yaml"
check "the broken copy differs from the DaemonSet (the control really breaks it)" \
	eval '! cmp -s "$K8S/daemonset.yaml" "$WORK/broken.yaml"'
bad=$(validate "$WORK/broken.yaml")
say "$bad" | sed 's/^/    /' | cut -c1-300
check "a DaemonSet with hostPID: \"yes\" and a string containerPort fails validation" \
	eval '! validate "$WORK/broken.yaml" >/dev/null && grep -q "^FAIL " <<<"$bad"'

facts=$(validate --facts "${files[@]}")
fact() { sed -n "s|^$1 ||p" <<<"$facts"; }
check "one container" test "$(fact containers)" = 1
check "hostPID: true" test "$(fact hostPID)" = true
check "no hostNetwork (the metrics endpoint is in the pod's own network namespace)" test "$(fact hostNetwork)" = false
check "its ServiceAccount is perfmapd" test "$(fact serviceAccount)" = perfmapd
check "privileged: false" test "$(fact privileged)" = false
check "runAsUser: 0" test "$(fact runAsUser)" = 0
check "the node's /tmp is mounted read-write at /tmp" test "$(fact mount:/tmp)" = hostPath:/tmp:rw
check "the archive is the node's /var/lib/perfmapd" test "$(fact mount:/var/lib/perfmapd)" = hostPath:/var/lib/perfmapd:rw
check "/sys/kernel/btf is mounted read-only" test "$(fact mount:/sys/kernel/btf)" = hostPath:/sys/kernel/btf:ro
check "the agent runs on --map-dir /tmp" test "$(fact map-dir)" = /tmp
for r in requests.cpu requests.memory limits.cpu limits.memory; do
	check "resources: $r is set ($(fact $r))" test -n "$(fact $r)"
done
check "the liveness probe asks the agent's status socket (perfmapctl status), not the metrics endpoint node users share" \
	test "$(fact liveness)" = "exec:/usr/bin/perfmapctl status --map-dir /tmp --run-dir /run/perfmapd"
check "the agent's --metrics-listen (from the ConfigMap) is 0.0.0.0:9848, the port the probe hits" \
	test "$(fact metrics-listen)" = 0.0.0.0:9848

caps=$(validate --caps "$K8S/daemonset.yaml")
documented=$(printf '%s\n%s\n' "$(caps_doc_kept "$TOP/docs/security.md")" "$(caps_doc_load "$TOP/docs/security.md")" | sort -u)
check "the DaemonSet drops ALL capabilities" eval '[ "$(sed -n "s/^drop //p" <<<"$caps")" = ALL ]'
check "the DaemonSet adds exactly the documented set (docs/security.md 9: kept + load only)" \
	same_set "daemonset / docs" "$(sed -n 's/^add //p' <<<"$caps" | caps_norm)" "$documented"
check "...which is the systemd unit's CapabilityBoundingSet= too" \
	same_set "daemonset / unit" "$(sed -n 's/^add //p' <<<"$caps" | caps_norm)" \
	"$(caps_unit "$TOP/deploy/systemd/perfmapd.service")"

say "k8s-test: $PASSES passed, $FAILS failed"
[ $FAILS -eq 0 ]
