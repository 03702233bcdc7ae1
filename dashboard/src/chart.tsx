/** A small live line chart (uPlot) that follows its container's width. */
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';

export interface Series {
  /** Seconds since the epoch. */
  times: number[];
  values: number[];
}

/** Seconds shown before the points span more. */
const WINDOW_SECONDS = 60;

const two = (n: number) => String(n).padStart(2, '0');

/**
 * The x axis's tick labels (local time): hh:mm:ss while the ticks lie within a day, the date
 * beyond. The chart's element keeps them in `data-x-ticks` (JSON) as drawn.
 */
export function timeTicks(splits: number[]): string[] {
  const span = splits.length > 1 ? splits[splits.length - 1]! - splits[0]! : 0;
  return splits.map((s) => {
    const d = new Date(s * 1000);
    return span < 86_400 ? `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}` : `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}`;
  });
}

export function LiveChart(props: { label: string; series: Series; height?: number }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  useEffect(() => {
    const el = box.current!;
    const color = getComputedStyle(document.documentElement).getPropertyValue('--accent').trim() || '#3b82f6';
    const axis = getComputedStyle(document.documentElement).getPropertyValue('--muted').trim() || '#888';
    const opts: uPlot.Options = {
      width: Math.max(100, el.clientWidth),
      height: props.height ?? 140,
      legend: { show: false },
      cursor: { show: false },
      scales: {
        // Until the points span a window, show the last WINDOW_SECONDS up to the newest point (or
        // now): uPlot's own range for zero or one point is years wide.
        x: {
          range: (_u, min, max) => {
            const end = Number.isFinite(max) && max !== null ? max : Date.now() / 1000;
            const range: uPlot.Range.MinMax = Number.isFinite(min) && min !== null && end - min >= WINDOW_SECONDS ? [min, end] : [end - WINDOW_SECONDS, end];
            el.dataset.xMin = String(Math.round(range[0]!));
            el.dataset.xMax = String(Math.round(range[1]!));
            return range;
          },
        },
        y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] },
      },
      axes: [
        {
          stroke: axis,
          grid: { show: false },
          ticks: { show: false },
          space: 70,
          values: (_u, splits) => {
            const labels = timeTicks(splits);
            el.dataset.xTicks = JSON.stringify(labels);
            return labels;
          },
        },
        { stroke: axis, size: 40, grid: { stroke: 'rgba(128,128,128,0.15)' } },
      ],
      series: [{}, { label: props.label, stroke: color, width: 2, fill: `${color}22` }],
    };
    plot.current = new uPlot(opts, [props.series.times, props.series.values], el);
    const resize = new ResizeObserver(() => plot.current?.setSize({ width: Math.max(100, el.clientWidth), height: props.height ?? 140 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.current?.destroy();
      plot.current = null;
    };
  }, []);
  useEffect(() => {
    plot.current?.setData([props.series.times, props.series.values]);
  }, [props.series]);
  return <div class="chart" ref={box} aria-label={props.label} />;
}

/** Appends a point and keeps the last `keep` (a new object, so the chart effect runs). */
export function pushPoint(series: Series, time: number, value: number, keep = 120): Series {
  const times = [...series.times, time].slice(-keep);
  const values = [...series.values, value].slice(-keep);
  return { times, values };
}
