/** Shorter credentials are not redacted: replacing every "t" in a text would only garble it. */
export const MIN_REDACTED_SECRET_LENGTH = 8;

/**
 * The text with every occurrence of the secret replaced. Done on a source's text as it arrives,
 * before anything cuts, stores or logs it: a cut made first can leave a prefix of the secret that
 * no later replacement of the whole secret would find.
 */
export function redactSecret(text: string, secret: string | undefined): string {
  if (!secret || secret.length < MIN_REDACTED_SECRET_LENGTH) return text;
  return text.replaceAll(secret, "[redacted]");
}
