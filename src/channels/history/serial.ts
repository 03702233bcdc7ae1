/**
 * The serial of a kept event: `<generation>-<sequence>`, both zero-padded decimal, so that
 * string order is publish order. The sequence counts the channel's events one by one (no gap)
 * within a generation; a generation is the time (epoch ms) its channel's count started, after
 * the shard had nothing kept for the channel (first event, or every event evicted and the
 * shard restarted). A restarted shard resumes a channel with kept events in its generation, and
 * starts a later one otherwise: serials never go backwards. In a cluster Redis gives both, in
 * the script that keeps the event (channels/adapter/redis/history-store.ts): the generation is
 * Redis' time when the channel's record started.
 */

/** Digits of the generation (epoch ms: 13 digits until the year 2286). */
const GENERATION_DIGITS = 13;
/** Digits of the sequence. */
const SEQUENCE_DIGITS = 12;
const SERIAL = /^(\d{13})-(\d{12})$/;

export interface SerialParts {
  generation: number;
  sequence: number;
}

export function formatSerial(generation: number, sequence: number): string {
  return `${String(generation).padStart(GENERATION_DIGITS, '0')}-${String(sequence).padStart(SEQUENCE_DIGITS, '0')}`;
}

/** The parts of a serial, or null when the text is not one. */
export function parseSerial(text: string): SerialParts | null {
  const m = SERIAL.exec(text);
  return m ? { generation: Number(m[1]), sequence: Number(m[2]) } : null;
}
