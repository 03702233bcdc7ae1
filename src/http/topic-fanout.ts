/**
 * The publish target of channel delivery (channels/adapter/topic-delivery.ts), implemented by
 * the HTTP layer's MainApp (tls.ts): here so that both may import it.
 */
import type { RecognizedString, WebSocket } from 'uWebSockets.js';

/**
 * Where frames go: the uWS topics of every app of this process whose WebSocket connections may
 * be subscribed. One app, unless a TLS reload handed the port to a new app while the old one
 * still has connections (MainApp in http/tls.ts implements it).
 */
export interface TopicFanout {
  publish(topic: RecognizedString, message: RecognizedString): void;
  /** Subscribers of the topic, over every app. */
  numSubscribers(topic: RecognizedString): number;
  /** Publishes from `ws` (subscribed to the topic): every subscriber but `ws` gets it. */
  publishFrom(ws: WebSocket<unknown>, topic: RecognizedString, message: RecognizedString): void;
}
