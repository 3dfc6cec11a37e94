/**
 * Hostile messages for the mail intake's fuzz test, from a seeded generator (the same seed
 * gives the same bytes, so a failure names a message that can be sent again): header blocks
 * that mail programs read differently or that are too large, and MIME bodies that no parser
 * reads whole. Each message has its own From; the victim's address is hidden wherever an
 * attacker would put it (a second From-like line, Reply-To, Sender, To), so a test can assert
 * that it never gets mail.
 */

export const VICTIM = "victim@victim.test";

/** The verdict a header block decides by itself, whatever the body; null when the body decides. */
export type ExpectedVerdict = { status: "rejected"; outcome: string } | null;

export interface HostileMessage {
  name: string;
  from: string;
  messageId: string;
  raw: Buffer;
  expected: ExpectedVerdict;
}

/** mulberry32: a small seeded generator, enough for test data. */
export function seededRandom(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
  const int = (min: number, max: number) => min + Math.floor(next() * (max - min + 1));
  const pick = <T>(items: readonly T[]): T => items[int(0, items.length - 1)] as T;
  const bytes = (length: number, from = 0, to = 255) =>
    Buffer.from(Array.from({ length }, () => int(from, to)));
  return { next, int, pick, bytes };
}

type Random = ReturnType<typeof seededRandom>;

interface Parts {
  from: string;
  messageId: string;
  payout: string;
  random: Random;
}

/** Header lines as latin1 strings (bytes 0-255); `expected` when they decide the verdict. */
interface HeaderKind {
  lines(parts: Parts): string[];
  expected: ExpectedVerdict;
  /** A header block with nothing after it: no blank line, no body. */
  noBody?: boolean;
}

const plain = ({ from, messageId, payout }: Parts) => [
  `From: Fuzz <${from}>`,
  "To: earn@pay-and-earn.test",
  `Subject: earn ${payout}`,
  `Message-ID: ${messageId}`,
  "Date: Fri, 27 Nov 2026 08:00:00 +0000",
];

const TRICK = { status: "rejected", outcome: "header_trick" } as const;
const TOO_LARGE = { status: "rejected", outcome: "headers_too_large" } as const;
const NO_SENDER = { status: "rejected", outcome: "no_sender" } as const;
const CONTROL_BYTES = [
  ...Array.from({ length: 0x20 }, (_, byte) => byte).filter(
    (byte) => byte !== 0x09 && byte !== 0x0a && byte !== 0x0d,
  ),
  0x7f,
];

/** Another From the way some parser reads one: each is a From to someone. */
const FROM_LIKE = [
  `from : ${VICTIM}`,
  `FROM:${VICTIM}`,
  `From\t: ${VICTIM}`,
  `>From: ${VICTIM}`,
  `\x0bFrom: ${VICTIM}`,
  `From : Victim <${VICTIM}>`,
];

export const HEADER_KINDS: Record<string, HeaderKind> = {
  plain: {
    lines: (parts) => [...plain(parts), `Reply-To: ${VICTIM}`, `Sender: ${VICTIM}`],
    expected: null,
  },
  many_headers: {
    lines: (parts) => [
      ...plain(parts),
      ...Array.from({ length: parts.random.int(500, 1_500) }, (_, i) => `X-Filler-${i}: ${i}`),
    ],
    expected: null,
  },
  many_headers_too_large: {
    lines: (parts) => [
      ...plain(parts),
      ...Array.from({ length: 5_000 }, (_, i) => `X-Filler-${i}: ${"f".repeat(10)}`),
    ],
    expected: TOO_LARGE,
  },
  huge_header: {
    lines: (parts) => [...plain(parts), `X-Huge: ${"h".repeat(parts.random.int(70_000, 200_000))}`],
    expected: TOO_LARGE,
  },
  folded_header: {
    lines: (parts) => [
      ...plain(parts),
      `X-Folded: start${"\r\n continued".repeat(parts.random.int(500, 3_000))}`,
    ],
    expected: null,
  },
  control_byte: {
    lines: (parts) => {
      const lines = plain(parts);
      const at = parts.random.int(0, lines.length - 1);
      const byte = String.fromCharCode(parts.random.pick(CONTROL_BYTES));
      lines[at] = `${lines[at]}${byte}x`;
      return lines;
    },
    expected: TRICK,
  },
  nul_in_from: {
    lines: (parts) => plain(parts).map((line) => line.replace(/^From: /, "From: \x00")),
    expected: TRICK,
  },
  bare_cr: {
    lines: (parts) => [...plain(parts), `Subject: a\rFrom: ${VICTIM}`],
    expected: TRICK,
  },
  from_like_line: {
    lines: (parts) => {
      const lines = plain(parts);
      lines.splice(parts.random.int(0, lines.length), 0, parts.random.pick(FROM_LIKE));
      return lines;
    },
    expected: TRICK,
  },
  many_from_lines: {
    lines: (parts) => [
      ...plain(parts),
      ...Array.from({ length: parts.random.int(2, 500) }, () => `From: ${VICTIM}`),
    ],
    expected: TRICK,
  },
  eight_bit: {
    lines: (parts) =>
      plain(parts).map((line) =>
        /^(Subject|From):/.test(line)
          ? line.replace(
              ": ",
              `: ${parts.random.bytes(parts.random.int(1, 40), 0x80).toString("latin1")} `,
            )
          : line,
      ),
    expected: null,
  },
  bad_encoded_words: {
    lines: (parts) =>
      plain(parts).map((line) =>
        line
          .replace(
            /^Subject: /,
            `Subject: =?x-unknown?B?!!!?= =?utf-8?Q?=ZZ=?= ${"=?utf-8?B?".repeat(200)} `,
          )
          .replace(/^From: Fuzz/, "From: =?utf-8?Q?=E2=80=AE?= =?bogus?X?x?="),
      ),
    expected: null,
  },
  many_addresses_in_from: {
    lines: (parts) =>
      plain(parts).map((line) =>
        line.startsWith("From:")
          ? `From: ${parts.from}, ${Array.from({ length: parts.random.int(2, 300) }, (_, i) => `v${i}@victim.test`).join(", ")}`
          : line,
      ),
    expected: NO_SENDER,
  },
  empty_group_from: {
    lines: (parts) =>
      plain(parts).map((line) =>
        line.startsWith("From:") ? "From: undisclosed-recipients:;" : line,
      ),
    expected: NO_SENDER,
  },
  dkim_flood: {
    lines: (parts) => [
      ...Array.from(
        { length: parts.random.int(10, 200) },
        (_, i) =>
          `DKIM-Signature: v=1; a=rsa-sha256; d=fuzz.test; s=s${i}; h=from; bh=AA==; b=AA==`,
      ),
      ...plain(parts),
    ],
    expected: null,
  },
  header_block_only: {
    lines: (parts) => plain(parts),
    expected: null,
    noBody: true,
  },
};

interface BodyKind {
  /** Header lines the body needs (Content-Type …) and the body's bytes. */
  make(parts: Parts): { headers: string[]; body: Buffer };
}

const text = (value: string) => Buffer.from(value, "latin1");

export const BODY_KINDS: Record<string, BodyKind> = {
  text: { make: ({ payout }) => ({ headers: [], body: text(`Pay me at ${payout}\r\n`) }) },
  unterminated_boundaries: {
    make: ({ payout }) => ({
      headers: ['Content-Type: multipart/mixed; boundary="outer"'],
      body: text(
        [
          "--outer",
          'Content-Type: multipart/alternative; boundary="inner"',
          "",
          "--never-closed",
          "Content-Type: text/plain",
          "",
          payout,
          "--outer",
          "Content-Type: text/plain",
          "",
          "the outer boundary never ends",
        ].join("\r\n"),
      ),
    }),
  },
  nested_multiparts: {
    make: ({ payout, random }) => {
      const depth = random.int(20, 3_000);
      const levels = Array.from(
        { length: depth },
        (_, i) => `--b${i}\r\nContent-Type: multipart/mixed; boundary="b${i + 1}"\r\n\r\n`,
      ).join("");
      return {
        headers: ['Content-Type: multipart/mixed; boundary="b0"'],
        body: text(`${levels}--b${depth}\r\nContent-Type: text/plain\r\n\r\n${payout}\r\n`),
      };
    },
  },
  many_parts: {
    make: ({ random }) => ({
      headers: ["Content-Type: multipart/mixed; boundary=p"],
      body: text(
        `${"--p\r\nContent-Type: text/plain\r\n\r\nhi\r\n".repeat(random.int(100, 3_000))}--p--\r\n`,
      ),
    }),
  },
  bad_transfer_encodings: {
    make: ({ payout }) => ({
      headers: ["Content-Type: multipart/mixed; boundary=e"],
      body: text(
        [
          "--e",
          "Content-Type: text/plain; charset=utf-8",
          "Content-Transfer-Encoding: base64",
          "",
          "!!!! not base64 @@@@ ====",
          "--e",
          "Content-Type: text/plain; charset=nonsense-charset",
          "Content-Transfer-Encoding: quoted-printable",
          "",
          `=ZZ= =\r\n=4 ${payout}`,
          "--e",
          "Content-Type: text/plain",
          "Content-Transfer-Encoding: x-unknown-encoding",
          "",
          "???",
          "--e--",
          "",
        ].join("\r\n"),
      ),
    }),
  },
  binary_noise: {
    make: ({ random }) => ({
      headers: [
        random.pick([
          "Content-Type: text/plain; charset=utf-8",
          "Content-Type: text/html",
          "Content-Type: application/octet-stream",
        ]),
        "Content-Transfer-Encoding: 8bit",
      ],
      body: random.bytes(random.int(1, 50_000)),
    }),
  },
  html_heavy: {
    make: ({ payout, random }) => ({
      headers: ["Content-Type: text/html; charset=utf-8"],
      body: text(`${"<div><table><tr><td>".repeat(random.int(1_000, 20_000))}${payout}`),
    }),
  },
  empty: { make: () => ({ headers: [], body: Buffer.alloc(0) }) },
  /** Over MAIL_MAX_BYTES (1 MiB by default): only its header block is kept. */
  over_size_limit: {
    make: ({ payout }) => ({
      headers: [],
      body: text(`${payout} ${"x".repeat(76)}\r\n`.repeat(9_000)),
    }),
  },
};

/** One message of `header` and `body` kind, from the generator's next values. */
export function hostileMessage(
  random: Random,
  index: number,
  header: string,
  body: string,
  payout: string,
): HostileMessage {
  const from = `fuzz-${index}@fuzz.test`;
  const messageId = `<fuzz-${index}@fuzz.test>`;
  const parts: Parts = { from, messageId, payout, random };
  const headerKind = HEADER_KINDS[header] as HeaderKind;
  const lines = headerKind.lines(parts);
  if (headerKind.noBody) {
    return {
      name: `${index}: ${header}`,
      from,
      messageId,
      raw: text(`${lines.join("\r\n")}\r\n`),
      expected: headerKind.expected,
    };
  }
  const made = (BODY_KINDS[body] as BodyKind).make(parts);
  return {
    name: `${index}: ${header} + ${body}`,
    from,
    messageId,
    raw: Buffer.concat([text(`${[...lines, ...made.headers].join("\r\n")}\r\n\r\n`), made.body]),
    expected: headerKind.expected,
  };
}

/**
 * Pairs a seed once found wrong, always sent: a header block over MAX_HEADER_BYTES in a message
 * over MAIL_MAX_BYTES was stored cut off and read as if whole (seed 1), so answered.
 */
const FOUND: [string, string][] = [["huge_header", "over_size_limit"]];

/**
 * The fuzz corpus: every header kind with a random body, every body kind under a plain
 * header, the pairs found before, then `extra` random pairs.
 */
export function hostileCorpus(seed: number, payouts: string[], extra: number): HostileMessage[] {
  const random = seededRandom(seed);
  const headers = Object.keys(HEADER_KINDS);
  const bodies = Object.keys(BODY_KINDS);
  const pairs: [string, string][] = [
    ...headers.map((header): [string, string] => [header, random.pick(bodies)]),
    ...bodies.map((body): [string, string] => ["plain", body]),
    ...FOUND,
    ...Array.from({ length: extra }, (): [string, string] => [
      random.pick(headers),
      random.pick(bodies),
    ]),
  ];
  return pairs.map(([header, body], index) =>
    hostileMessage(random, index, header, body, payouts[index % payouts.length] as string),
  );
}
