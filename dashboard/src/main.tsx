/** The dashboard's shell: sign-in, routing between the three views, theme. */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { ApiError, api, setUnauthorizedHandler, storeToken, storedToken } from './api';
import { OverviewPage } from './overview';
import { AppPage } from './app-view';
import { ChannelPage } from './channel-view';
import { PushPage } from './push-view';
import { AppsPage, PushInstancesPage } from './tenants';
import { Link, parseRoute, type Route } from './router';

function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.pathname));
    window.addEventListener('popstate', update);
    window.addEventListener('herald:navigate', update);
    return () => {
      window.removeEventListener('popstate', update);
      window.removeEventListener('herald:navigate', update);
    };
  }, []);
  return route;
}

type Theme = 'auto' | 'light' | 'dark';

function useTheme(): [Theme, () => void] {
  const [theme, setTheme] = useState<Theme>(() => (localStorage.getItem('herald-theme') as Theme | null) ?? 'auto');
  useEffect(() => {
    if (theme === 'auto') delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = theme;
    localStorage.setItem('herald-theme', theme);
  }, [theme]);
  const next = () => setTheme((t) => (t === 'auto' ? 'dark' : t === 'dark' ? 'light' : 'auto'));
  return [theme, next];
}

function SignIn(props: { onSignedIn: () => void }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api('/session', { token });
      storeToken(token);
      props.onSignedIn();
    } catch (err) {
      if (err instanceof ApiError && err.status === 429) setError(`Too many failed sign-ins: try again in ${err.retryAfterSeconds ?? 60} s.`);
      else if (err instanceof ApiError && err.status === 401) setError('Wrong admin token.');
      else setError(`Sign-in failed: ${(err as Error).message}`);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <form class="card" onSubmit={submit}>
        <h1>Herald</h1>
        <label for="admin-token">Admin token</label>
        <input id="admin-token" type="password" autocomplete="current-password" value={token} onInput={(e) => setToken((e.target as HTMLInputElement).value)} required />
        <button type="submit" disabled={busy}>Sign in</button>
        {error && <p class="error" role="alert">{error}</p>}
      </form>
    </main>
  );
}

function App() {
  const [signedIn, setSignedIn] = useState<boolean>(() => storedToken() !== null);
  const [theme, nextTheme] = useTheme();
  const route = useRoute();
  useEffect(() => {
    setUnauthorizedHandler(() => {
      storeToken(null);
      setSignedIn(false);
    });
    // `#token=<token>` signs in (the link `npm start` prints); the hash is removed at once.
    const m = /^#token=(.+)$/.exec(location.hash);
    if (m) {
      const token = decodeURIComponent(m[1]!);
      history.replaceState(null, '', location.pathname + location.search);
      api('/session', { token }).then(
        () => {
          storeToken(token);
          setSignedIn(true);
        },
        () => undefined,
      );
    }
  }, []);
  if (!signedIn) return <SignIn onSignedIn={() => setSignedIn(true)} />;
  return (
    <div class="shell">
      <header class="top">
        <Link href="/dashboard" class="brand">Herald</Link>
        <nav>
          <Link href="/dashboard">Overview</Link>
          <Link href="/dashboard/apps">Apps</Link>
          <Link href="/dashboard/push">Push instances</Link>
        </nav>
        <span class="spacer" />
        <button class="ghost" type="button" onClick={nextTheme} title="Theme: auto, dark, light">Theme: {theme}</button>
        <button
          class="ghost"
          type="button"
          onClick={() => {
            storeToken(null);
            setSignedIn(false);
          }}
        >
          Sign out
        </button>
      </header>
      <main class="content">
        {route.view === 'overview' && <OverviewPage />}
        {route.view === 'apps' && <AppsPage />}
        {route.view === 'push-instances' && <PushInstancesPage />}
        {route.view === 'app' && <AppPage key={route.appId} appId={route.appId} />}
        {route.view === 'channel' && <ChannelPage key={`${route.appId}/${route.channel}`} appId={route.appId} channel={route.channel} />}
        {route.view === 'push' && <PushPage key={route.instanceId} instanceId={route.instanceId} />}
        {route.view === 'missing' && (
          <section class="card">
            <h2>Not found</h2>
            <p>
              No such page. <Link href="/dashboard">Back to the overview</Link>
            </p>
          </section>
        )}
      </main>
    </div>
  );
}

render(<App />, document.getElementById('root')!);
