#pragma once

#include "base/status.h"

namespace dsh::host {
class Host;
}

namespace dsh::plugins::webhooks {

// Outbound notifications (docs/NOTIFICATIONS.md), always composed: the
// endpoints of `notifications.webhooks` and those saved from the Settings
// page become the agents' subscriptions (so the facts they record write
// outbox messages in their own transactions), a dsh::webhooks::Sender
// delivers them from Start to Stop, and the routes under
// /api/notifications, the metrics dsh_webhook_deliveries_total and
// dsh_webhook_outbox_pending, and the outbox's retention (as loop runs',
// `retention.loop_run_days`) are added. Call after Host::Open, before
// Host::Start. Errors: `invalid_config` (a secret file that cannot be read
// or is readable by others, a bad secret, a broken webhooks.yml).
Status RegisterWebhooksPlugin(host::Host& host);

}  // namespace dsh::plugins::webhooks
