/** True for a JSON object (not null, not an array): the shape of payload objects and gateway error bodies. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
