/**
 * The publish target of channel delivery (channels/adapter/topic-delivery.ts), implemented by
 * the HTTP layer's MainApp (tls.ts): here so that both may import it.
 */
import type { RecognizedString } from 'uWebSockets.js';

/**
 * Told of each subscription a socket or fallback session takes or drops on a topic, a closed
 * socket's included: how a front-end thread keeps its share of the topic-interest table.
 */
export interface TopicInterestHook {
  add(topic: string): void;
  remove(topic: string): void;
}

/**
 * A fanout over several front-end threads: it excludes a socket by id on whichever thread
 * holds it (front-end/fanout.ts).
 */
export interface ExceptPublisher {
  /** Every subscriber of the topic but the socket `exceptSocketId`, wherever it is. */
  publishExcept(topic: RecognizedString, message: RecognizedString, exceptSocketId: string): void;
}

/** A socket that publishes from itself: uWS' WebSocket, or an HTTP fallback session standing in for one. */
export interface PublishingSocket {
  /** Sends to every subscriber of the topic but this socket. */
  publish(topic: RecognizedString, message: RecognizedString): boolean;
}

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
  publishFrom(ws: PublishingSocket, topic: RecognizedString, message: RecognizedString): void;
}
