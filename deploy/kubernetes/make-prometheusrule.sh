#!/usr/bin/env sh
# Wraps every rules file in deploy/prometheus/rules/ into one PrometheusRule object for the
# Prometheus Operator. Its output is deploy/kubernetes/base/prometheusrule.yaml, part of the
# kustomization; scripts/update-docs regenerates it and a test fails while it is out of date:
#   deploy/kubernetes/make-prometheusrule.sh > deploy/kubernetes/base/prometheusrule.yaml
set -eu
rules_dir="$(dirname "$0")/../prometheus/rules"
cat <<'HEAD'
# Generated from deploy/prometheus/rules/*.yaml by make-prometheusrule.sh: edit those files and run
# scripts/update-docs instead of editing this one.
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
