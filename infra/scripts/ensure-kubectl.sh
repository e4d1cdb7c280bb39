#!/usr/bin/env bash
# The deploy manifests' test (packages/local-cluster/test/deploy-manifests.test.ts) renders the
# kustomize overlay with `kubectl kustomize`, offline. Any kubectl will do: the kustomization is
# written so that Debian's kubernetes-client (kubectl 1.20, kustomize v2) builds it exactly as
# kubectl 1.32 (kustomize v5) does. On a fresh machine, install it where we can (root with apt-get).
set -u
command -v kubectl >/dev/null 2>&1 && exit 0
command -v kustomize >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "== installing Debian's kubectl for the manifests test (apt-get install -y --no-install-recommends kubernetes-client)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client; } </dev/null && exit 0
fi
echo "the deploy manifests' test needs kubectl (or kustomize) on PATH: run 'sudo apt-get install -y --no-install-recommends kubernetes-client'" >&2
exit 1
