/**
 * The sample Kubernetes manifest (deploy/kubernetes/herald.yaml), checked without a cluster:
 * its config file loads through Herald's own config loader with the environment the pods get
 * (a cluster node with Redis and PostgreSQL, every replica the same), the container port is the
 * configured one, readiness is /ready on it, the data dir is scratch (an emptyDir) mounted
 * where the config puts it, and nothing makes one pod differ from another.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config/load.js';
import { REPO_ROOT } from '../../helpers/herald-process.js';

interface Manifest {
  kind: string;
  metadata: { name: string };
  data?: Record<string, string>;
  spec?: Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

const documents = yaml.loadAll(readFileSync(join(REPO_ROOT, 'deploy/kubernetes/herald.yaml'), 'utf8')) as Manifest[];
const ofKind = (kind: string): Manifest => {
  const found = documents.filter((d) => d.kind === kind);
  expect(found, kind).toHaveLength(1);
  return found[0]!;
};

describe('deploy/kubernetes/herald.yaml', () => {
  const configMap = ofKind('ConfigMap');
  const deployment = ofKind('Deployment');
  const service = ofKind('Service');
  const pod = deployment.spec!.template.spec;
  const container = pod.containers[0];

  it('runs a config Herald loads as a cluster node with Redis and PostgreSQL, from the environment the pods get', () => {
    const dir = mkdtempSync(join(tmpdir(), 'herald-k8s-'));
    try {
      const path = join(dir, 'config.json');
      writeFileSync(path, configMap.data!['config.json']!);
      const envNames = (container.env as { name: string; valueFrom?: unknown }[]).map((e) => e.name);
      expect(envNames.sort()).toEqual(['HERALD_POSTGRES_URL', 'HERALD_REDIS_URL']);
      const config = loadConfig({ configPath: path, env: { HERALD_REDIS_URL: 'redis://redis:6379', HERALD_POSTGRES_URL: 'postgres://herald@postgres:5432/herald' } });
      expect(config.cluster).toMatchObject({ redisUrl: 'redis://redis:6379', postgresUrl: 'postgres://herald@postgres:5432/herald' });
      expect(config.push.length).toBeGreaterThan(0);
      // The same on every replica: no node id of its own (each pod gets its hostname's).
      expect(config.cluster!.nodeId).toBeUndefined();

      expect(container.args).toEqual(['--config', '/etc/herald/config.json']);
      const mounts = container.volumeMounts as { name: string; mountPath: string }[];
      expect(mounts.find((m) => m.mountPath === '/etc/herald')?.name).toBe('config');
      const dataMount = mounts.find((m) => m.mountPath === config.dataDir);
      expect(dataMount, `a volume at dataDir ${config.dataDir}`).toBeDefined();
      // The data dir is scratch: no PersistentVolumeClaim, no StatefulSet.
      const volume = (pod.volumes as { name: string; emptyDir?: unknown }[]).find((v) => v.name === dataMount!.name);
      expect(volume?.emptyDir).toBeDefined();
      expect(documents.map((d) => d.kind)).not.toContain('StatefulSet');
      expect(documents.map((d) => d.kind)).not.toContain('PersistentVolumeClaim');

      const port = container.ports.find((p: { name: string }) => p.name === 'http');
      expect(port.containerPort).toBe(config.port);
      expect(container.readinessProbe.httpGet).toEqual({ path: '/ready', port: 'http' });
      expect(container.livenessProbe.httpGet).toEqual({ path: '/health', port: 'http' });
      // Draining ends within shutdownTimeoutSeconds + 2 s: the grace period leaves room for it.
      expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(config.shutdownTimeoutSeconds + 2);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('sends the Service to every replica on the container port', () => {
    expect(deployment.spec!.replicas).toBeGreaterThan(1);
    expect(service.spec!.selector).toEqual(deployment.spec!.selector.matchLabels);
    expect(deployment.spec!.template.metadata.labels).toMatchObject(deployment.spec!.selector.matchLabels);
    expect(service.spec!.ports[0].targetPort).toBe('http');
    expect(configMap.metadata.name).toBe(pod.volumes.find((v: { name: string }) => v.name === 'config').configMap.name);
  });
});
