/**
 * R1/R2 `POST /reporting_api/v2/instances/<instance_id>/events`: a client SDK reports that a
 * notification was delivered or opened. No authentication (the SDKs send none). Checks, in
 * order: instance id (400 missing, 400 not a UUID, 404 not configured), Content-Type (400),
 * readable JSON object (400), fields (400, one error per missing field). The report is then
 * written on the shard of its device; the 200 comes after that shard's synced commit.
 */
import type { Handler, RequestContext, Reply } from '../../../http/uws-http.js';
import type { ServerContext } from '../../../server-context.js';
import { okReply, parseJsonObject, requireInstance, requireJsonContentType } from '../common.js';
import { parseReport } from './report-body.js';

/** Largest report body read (bytes); a report is a few hundred bytes. */
export const REPORT_BODY_LIMIT = 16 * 1024;

/** The R1/R2 handler. Duplicates and reports of unknown devices answer 200 too (not counted). */
export function reportEventHandler(ctx: Pick<ServerContext, 'pushInstances' | 'reports'>): Handler {
  return async (req: RequestContext): Promise<Reply> => {
    const instance = requireInstance(ctx, req.params.instanceId);
    requireJsonContentType(req.headers);
    const report = parseReport(instance.instanceId, parseJsonObject(req.body));
    await ctx.reports.record(report);
    return okReply();
  };
}
