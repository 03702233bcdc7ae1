/** Small shared pieces: polling, formatting, copy-on-demand of a secret. */
import { useEffect, useState } from 'preact/hooks';
import { api } from './api';

/** Fetches `path` now and every `everyMs` (0: only now); `reload()` fetches again at once. */
export function usePoll<T>(path: string, everyMs: number): { data: T | null; error: string | null; reload: () => void } {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    const load = () =>
      api<T>(path).then(
        (d) => {
          if (!live) return;
          setData(d);
          setError(null);
        },
        (err: Error) => live && setError(err.message),
      );
    void load();
    const timer = everyMs > 0 ? window.setInterval(load, everyMs) : undefined;
    return () => {
      live = false;
      window.clearInterval(timer);
    };
  }, [path, everyMs, tick]);
  return { data, error, reload: () => setTick((t) => t + 1) };
}

export function formatDuration(seconds: number): string {
  const d = Math.floor(seconds / 86400);
  const h = Math.floor((seconds % 86400) / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = seconds % 60;
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s}s`;
  return `${s}s`;
}

export function formatNumber(n: number | null | undefined, digits = 0): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '–';
  return n.toLocaleString(undefined, { maximumFractionDigits: digits });
}

export function formatTime(iso: string | number): string {
  return new Date(iso).toLocaleTimeString();
}

/**
 * A masked secret with a button that fetches the real one and copies it to the clipboard. Pages
 * served over plain HTTP from another host have no clipboard API: the secret is then shown in a
 * prompt to copy by hand.
 */
export function Secret(props: { masked: string; path: string; field: string }) {
  const [state, setState] = useState<string | null>(null);
  const copy = async () => {
    try {
      const body = await api<Record<string, string>>(props.path);
      const secret = body[props.field] ?? '';
      if (navigator.clipboard && window.isSecureContext) {
        await navigator.clipboard.writeText(secret);
        setState('Copied');
      } else {
        window.prompt('Copy the secret', secret);
      }
    } catch {
      setState('Copy failed');
    }
    window.setTimeout(() => setState(null), 2000);
  };
  return (
    <span class="secret">
      <code>{props.masked}</code>
      <button type="button" class="small ghost" onClick={() => void copy()}>
        {state ?? 'Copy'}
      </button>
    </span>
  );
}

export function Stat(props: { label: string; value: string; hint?: string }) {
  return (
    <div class="stat card">
      <div class="stat-label">{props.label}</div>
      <div class="stat-value">{props.value}</div>
      {props.hint && <div class="stat-hint">{props.hint}</div>}
    </div>
  );
}
