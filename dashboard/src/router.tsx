/** Path-based routing: every view is a real URL the server answers with the page (deep links). */
import type { ComponentChildren } from 'preact';

export type Route = { view: 'overview' } | { view: 'apps' } | { view: 'push-instances' } | { view: 'app'; appId: string } | { view: 'channel'; appId: string; channel: string } | { view: 'push'; instanceId: string } | { view: 'missing' };

export function parseRoute(pathname: string): Route {
  const parts = pathname.replace(/\/+$/, '').split('/').slice(2).map(decodeURIComponent);
  if (parts.length === 0) return { view: 'overview' };
  if (parts[0] === 'apps' && parts.length === 1) return { view: 'apps' };
  if (parts[0] === 'push' && parts.length === 1) return { view: 'push-instances' };
  if (parts[0] === 'apps' && parts.length === 2) return { view: 'app', appId: parts[1]! };
  if (parts[0] === 'apps' && parts.length === 4 && parts[2] === 'channels') return { view: 'channel', appId: parts[1]!, channel: parts[3]! };
  if (parts[0] === 'push' && parts.length === 2) return { view: 'push', instanceId: parts[1]! };
  return { view: 'missing' };
}

/** Client-side navigation: every view is also a real URL the server answers (deep links). */
export function navigate(href: string): void {
  history.pushState(null, '', href);
  window.dispatchEvent(new Event('herald:navigate'));
}

export function Link(props: { href: string; children: ComponentChildren; class?: string }) {
  return (
    <a
      href={props.href}
      class={props.class}
      onClick={(e) => {
        if (e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
        e.preventDefault();
        navigate(props.href);
      }}
    >
      {props.children}
    </a>
  );
}

