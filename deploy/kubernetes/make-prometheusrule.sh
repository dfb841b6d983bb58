#!/usr/bin/env sh
# Wraps every rules file in deploy/prometheus/rules/ into one PrometheusRule object for the
# Prometheus Operator:  deploy/kubernetes/make-prometheusrule.sh | kubectl apply -f -
# (A test validates the output against the PrometheusRule schema.)
set -eu
rules_dir="$(dirname "$0")/../prometheus/rules"
cat <<'HEAD'
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: ncclscope
  namespace: ncclscope
  labels:
    app.kubernetes.io/name: ncclscope
spec:
  groups:
HEAD
for file in "$rules_dir"/*.yaml; do
  # Each rules file is comments plus one top-level `groups:` list; re-indent its items under spec.
  sed -n '/^groups:/,$p' "$file" | tail -n +2 | sed 's/^/  /'
done
