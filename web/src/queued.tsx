// Messages sent from this page that the conversation does not show yet
// (issue 30, defect 4): a steer or a follow-up sent during a turn waits in
// the session's inbox until the agent takes it, and only then is it a
// `message/user` event. Until its event arrives it is listed here, between
// the conversation and the composer, with where it will land; the event
// takes its place (matched by `message_id`), so it shows once.

export interface QueuedMessage {
  key: string;            // this page's, for the list
  sessionId: string;
  text: string;
  mode: "steer" | "followup";
  // Where it lands, decided when it was sent: at the running turn's next
  // step (a steer), after the running turn (a follow-up), or now (no turn
  // was running).
  lands: "next step" | "next turn" | "now";
  idempotencyKey: string; // the same on a retry: the host delivers it once
  messageId: string | null;  // once the host answered
  failure: string | null;    // why it was not sent, in words
}

export function Queued({ items, onRetry, onDiscard }: {
  items: QueuedMessage[];
  onRetry: (key: string) => void;
  onDiscard: (key: string) => void;
}) {
  if (items.length === 0) return null;
  return (
    <section class="queued" aria-label="Queued messages">
      <ul>
        {items.map((q) => {
          const where = q.lands === "now" ? "sending" : `queued for the ${q.lands}`;
          return (
            <li key={q.key} class={`queued-item${q.failure ? " failed" : ""}`} data-testid="queued"
                aria-label={q.failure ? `Not sent: ${q.text}` : `${where[0].toUpperCase()}${where.slice(1)}: ${q.text}`}>
              {!q.failure && <span class="tag">{where}</span>}
              <span class="queued-text">{q.text}</span>
              {q.failure && (
                <span class="queued-failure">
                  <span class="error-text" role="alert">{q.failure}</span>
                  <span class="queued-actions">
                    <button type="button" class="secondary" onClick={() => onRetry(q.key)}>Retry</button>
                    <button type="button" class="secondary" onClick={() => onDiscard(q.key)}>Discard</button>
                  </span>
                </span>
              )}
            </li>
          );
        })}
      </ul>
    </section>
  );
}
