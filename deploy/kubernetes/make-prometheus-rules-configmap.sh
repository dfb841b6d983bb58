#!/usr/bin/env sh
# Puts every rules file in deploy/prometheus/rules/ into one ConfigMap, a key per file, for a
# Prometheus without the Prometheus Operator (components/plain-prometheus). Its output is
# deploy/kubernetes/components/plain-prometheus/rules-configmap.yaml; scripts/update-docs
# regenerates it and a test fails while it is out of date:
#   deploy/kubernetes/make-prometheus-rules-configmap.sh > deploy/kubernetes/components/plain-prometheus/rules-configmap.yaml
set -eu
rules_dir="$(dirname "$0")/../prometheus/rules"
cat <<'HEAD'
# Generated from deploy/prometheus/rules/*.yaml by make-prometheus-rules-configmap.sh: edit those
# files and run scripts/update-docs instead of editing this one.
# In the namespace of your Prometheus (a ConfigMap volume must be in its pod's namespace): change
# it with a patch in your overlay. Mount it (e.g. at /etc/prometheus/ncclscope) and add
# `rule_files: [/etc/prometheus/ncclscope/*.yaml]` to prometheus.yml.
apiVersion: v1
kind: ConfigMap
metadata:
  name: ncclscope-prometheus-rules
  namespace: monitoring
  labels:
    app.kubernetes.io/name: ncclscope
data:
HEAD
for file in "$rules_dir"/*.yaml; do
  printf '  %s: |\n' "$(basename "$file")"
  sed 's/^\(.\)/    \1/' "$file"
done
