/** Main ↔ shard messages of deleted push instances (type-only): see push/store/namespaces.ts. */

export interface NamespaceShardApi {
  /**
   * A push instance is being deleted (admin API, or gone from the config file on reload): the
   * shard stops its publishes, retires the namespace it holds for the instance and takes `next`
   * (push/store/namespaces.ts newNamespace, the same on every shard), answered once durable;
   * the retired namespace's records are then purged in the background.
   */
  'push.retire': { req: { instanceId: string; next: string }; res: { retired: true } };
}
