/** The channel adapter contract against the local adapter (test/helpers/local-channel-adapter.ts). */
import { HARNESS_APP, startLocalAdapter } from '../../../helpers/local-channel-adapter.js';
import { CONTRACT_APP, channelAdapterContract } from './channel-adapter-contract.js';

if (CONTRACT_APP !== HARNESS_APP) throw new Error('the harness serves the contract app');
channelAdapterContract('local (shards + uWS topics)', () => startLocalAdapter());
