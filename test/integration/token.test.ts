import { authorizationTypes } from "@x402/evm";
import {
  type Abi,
  type Address,
  createPublicClient,
  createTestClient,
  createWalletClient,
  domainSeparator,
  type Hex,
  http,
  type LocalAccount,
  parseEventLogs,
  parseSignature,
  type TransactionReceipt,
  toHex,
} from "viem";
import { mnemonicToAccount } from "viem/accounts";
import { base } from "viem/chains";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { placeDevnetContracts, testUsdcArtifact } from "../../contracts-abi/artifacts.ts";
import { BASE_USDC_ADDRESS, usdcAbi } from "../../contracts-abi/usdc.ts";
import { type RunningAnvil, startAnvil } from "../../scripts/devnet/anvil.ts";
import { USDC } from "../support/usdc.ts";

const ANVIL_MNEMONIC = "test test test test test test test test test test test junk";
const anvilAccount = (addressIndex: number) => mnemonicToAccount(ANVIL_MNEMONIC, { addressIndex });
const alice = anvilAccount(0);
const bob = anvilAccount(1);
const carol = anvilAccount(2);

const domain = {
  name: "USD Coin",
  version: "2",
  chainId: base.id,
  verifyingContract: BASE_USDC_ADDRESS,
} as const;
const typedDataTypes = {
  ...authorizationTypes,
  ReceiveWithAuthorization: authorizationTypes.TransferWithAuthorization,
  CancelAuthorization: [
    { name: "authorizer", type: "address" },
    { name: "nonce", type: "bytes32" },
  ],
  Permit: [
    { name: "owner", type: "address" },
    { name: "spender", type: "address" },
    { name: "value", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
  ],
} as const;

// Hand-assembled ERC-1271 wallets: one returns the magic value 0x1626ba7e for any input,
// the other returns 32 zero bytes (a refusal).
const ACCEPTING_1271_WALLET = "0x631626ba7e60e01b60005260206000f3";
const REFUSING_1271_WALLET = "0x60206000f3";

const SECP256K1_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

let anvil: RunningAnvil;
let devnet: Awaited<ReturnType<typeof connect>>;
let snapshotId: Hex;

async function connect(rpcUrl: string) {
  const transport = http(rpcUrl);
  const publicClient = createPublicClient({ chain: base, transport, pollingInterval: 50 });
  const testClient = createTestClient({ mode: "anvil", chain: base, transport });
  const walletOf = (account: LocalAccount) =>
    createWalletClient({ account, chain: base, transport, pollingInterval: 50 });
  return { publicClient, testClient, walletOf };
}

beforeAll(async () => {
  anvil = await startAnvil({ port: 0, chainId: base.id });
  devnet = await connect(anvil.rpcUrl);
  await placeDevnetContracts(devnet.testClient);
});

afterAll(async () => {
  await anvil?.stop();
});

// Every test starts from the chain as placeDevnetContracts left it: no balances, no nonces.
beforeEach(async () => {
  snapshotId = await devnet.testClient.snapshot();
});
afterEach(async () => {
  await devnet.testClient.revert({ id: snapshotId });
});

/** Sends a token call from `sender` and returns its receipt; `abi` picks the overload set. */
async function send(
  sender: LocalAccount,
  functionName: string,
  args: readonly unknown[],
  abi: Abi = testUsdcArtifact.abi,
): Promise<TransactionReceipt> {
  const hash = await devnet
    .walletOf(sender)
    .writeContract({ address: BASE_USDC_ADDRESS, abi, functionName, args });
  const receipt = await devnet.publicClient.waitForTransactionReceipt({ hash });
  expect(receipt.status).toBe("success");
  return receipt;
}

function read(functionName: string, args: readonly unknown[] = []): Promise<unknown> {
  return devnet.publicClient.readContract({
    address: BASE_USDC_ADDRESS,
    abi: testUsdcArtifact.abi,
    functionName,
    args,
  });
}

const balanceOf = (account: Address) =>
  devnet.publicClient.readContract({
    address: BASE_USDC_ADDRESS,
    abi: usdcAbi,
    functionName: "balanceOf",
    args: [account],
  });

const authorizationState = (authorizer: Address, nonce: Hex) =>
  devnet.publicClient.readContract({
    address: BASE_USDC_ADDRESS,
    abi: usdcAbi,
    functionName: "authorizationState",
    args: [authorizer, nonce],
  });

const randomNonce = (): Hex => toHex(crypto.getRandomValues(new Uint8Array(32)));

async function latestTimestamp(): Promise<bigint> {
  return (await devnet.publicClient.getBlock()).timestamp;
}

interface Authorization {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
}

/** An authorization valid from now for an hour, unless `overrides` says otherwise. */
async function authorization(overrides: Partial<Authorization> = {}): Promise<Authorization> {
  return {
    from: alice.address,
    to: bob.address,
    value: 3n * USDC,
    validAfter: 0n,
    validBefore: (await latestTimestamp()) + 3600n,
    nonce: randomNonce(),
    ...overrides,
  };
}

function signAuthorization(
  signer: LocalAccount,
  message: Authorization,
  primaryType:
    | "TransferWithAuthorization"
    | "ReceiveWithAuthorization" = "TransferWithAuthorization",
): Promise<Hex> {
  return signer.signTypedData({ domain, types: typedDataTypes, primaryType, message });
}

/** The fields in contract argument order, then the signature split into v, r, s. */
function vrsArgs(auth: Authorization, signature: Hex) {
  const { v, r, s } = parseSignature(signature);
  return [
    auth.from,
    auth.to,
    auth.value,
    auth.validAfter,
    auth.validBefore,
    auth.nonce,
    Number(v),
    r,
    s,
  ] as const;
}

function bytesArgs(auth: Authorization, signature: Hex) {
  return [
    auth.from,
    auth.to,
    auth.value,
    auth.validAfter,
    auth.validBefore,
    auth.nonce,
    signature,
  ] as const;
}

describe("TestUSDC at the Base USDC address", () => {
  it("reports USDC's name, symbol, decimals and version", async () => {
    expect(await read("name")).toBe("USD Coin");
    expect(await read("symbol")).toBe("USDC");
    expect(await read("decimals")).toBe(6);
    expect(await read("version")).toBe("2");
    expect(await read("totalSupply")).toBe(0n);
  });

  it("computes the EIP-712 domain separator for this chain and address", async () => {
    expect(await read("DOMAIN_SEPARATOR")).toBe(domainSeparator({ domain }));
  });

  it("mints and transfers with Transfer events", async () => {
    const minted = await send(alice, "mint", [alice.address, 10n * USDC]);
    expect(parseEventLogs({ abi: usdcAbi, logs: minted.logs })).toMatchObject([
      {
        eventName: "Transfer",
        args: {
          from: "0x0000000000000000000000000000000000000000",
          to: alice.address,
          value: 10n * USDC,
        },
      },
    ]);

    const sent = await send(alice, "transfer", [bob.address, 4n * USDC], usdcAbi);
    expect(parseEventLogs({ abi: usdcAbi, logs: sent.logs })).toMatchObject([
      { eventName: "Transfer", args: { from: alice.address, to: bob.address, value: 4n * USDC } },
    ]);
    expect(await balanceOf(alice.address)).toBe(6n * USDC);
    expect(await balanceOf(bob.address)).toBe(4n * USDC);
    expect(await read("totalSupply")).toBe(10n * USDC);
  });

  it("refuses a transfer over the balance or to the zero address", async () => {
    await send(alice, "mint", [alice.address, USDC]);
    await expect(send(alice, "transfer", [bob.address, USDC + 1n])).rejects.toThrow(
      "ERC20: transfer amount exceeds balance",
    );
    await expect(
      send(alice, "transfer", ["0x0000000000000000000000000000000000000000", 1n]),
    ).rejects.toThrow("ERC20: transfer to the zero address");
    expect(await balanceOf(alice.address)).toBe(USDC);
  });
});

describe("EIP-3009", () => {
  beforeEach(async () => {
    await send(alice, "mint", [alice.address, 10n * USDC]);
  });

  it.each([
    ["v, r, s", vrsArgs],
    ["bytes signature", bytesArgs],
  ] as const)(
    "transferWithAuthorization (%s) moves the funds once and marks the nonce used",
    async (_, toArgs) => {
      const auth = await authorization();
      const signature = await signAuthorization(alice, auth);
      expect(await authorizationState(alice.address, auth.nonce)).toBe(false);

      // A third party (the facilitator) submits the payer's signed authorization.
      const receipt = await send(
        carol,
        "transferWithAuthorization",
        toArgs(auth, signature),
        usdcAbi,
      );

      expect(parseEventLogs({ abi: usdcAbi, logs: receipt.logs })).toMatchObject([
        { eventName: "AuthorizationUsed", args: { authorizer: alice.address, nonce: auth.nonce } },
        {
          eventName: "Transfer",
          args: { from: alice.address, to: bob.address, value: auth.value },
        },
      ]);
      expect(await authorizationState(alice.address, auth.nonce)).toBe(true);
      expect(await balanceOf(alice.address)).toBe(7n * USDC);
      expect(await balanceOf(bob.address)).toBe(3n * USDC);

      await expect(
        send(carol, "transferWithAuthorization", toArgs(auth, signature), usdcAbi),
      ).rejects.toThrow("FiatTokenV2: authorization is used or canceled");
      expect(await balanceOf(bob.address)).toBe(3n * USDC);
    },
  );

  it("refuses an authorization before validAfter and at or after validBefore", async () => {
    const now = await latestTimestamp();
    const early = await authorization({ validAfter: now + 3600n, validBefore: now + 7200n });
    await expect(
      send(
        carol,
        "transferWithAuthorization",
        vrsArgs(early, await signAuthorization(alice, early)),
      ),
    ).rejects.toThrow("FiatTokenV2: authorization is not yet valid");

    const expired = await authorization({ validAfter: 0n, validBefore: now });
    await expect(
      send(
        carol,
        "transferWithAuthorization",
        vrsArgs(expired, await signAuthorization(alice, expired)),
      ),
    ).rejects.toThrow("FiatTokenV2: authorization is expired");
    expect(await balanceOf(alice.address)).toBe(10n * USDC);
  });

  it("refuses a signature by someone other than `from`, or over different fields", async () => {
    const auth = await authorization();
    await expect(
      send(carol, "transferWithAuthorization", vrsArgs(auth, await signAuthorization(bob, auth))),
    ).rejects.toThrow("FiatTokenV2: invalid signature");

    const signed = await signAuthorization(alice, auth);
    await expect(
      send(
        carol,
        "transferWithAuthorization",
        bytesArgs({ ...auth, value: auth.value + 1n }, signed),
      ),
    ).rejects.toThrow("FiatTokenV2: invalid signature");
    expect(await authorizationState(alice.address, auth.nonce)).toBe(false);
  });

  it("refuses the malleable (high-s) twin of a valid signature", async () => {
    const auth = await authorization();
    const signature = await signAuthorization(alice, auth);
    const { r, s, v } = parseSignature(signature);
    // (r, n - s) with the other v recovers the same signer; only the low-s form is accepted.
    const highS = toHex(SECP256K1_ORDER - BigInt(s), { size: 32 });
    const twin = [...vrsArgs(auth, signature).slice(0, 6), v === 27n ? 28 : 27, r, highS];
    await expect(send(carol, "transferWithAuthorization", twin)).rejects.toThrow(
      "ECRecover: invalid signature 's' value",
    );
    await send(carol, "transferWithAuthorization", vrsArgs(auth, signature));
    expect(await balanceOf(bob.address)).toBe(auth.value);
  });

  it("receiveWithAuthorization may only be submitted by the payee", async () => {
    const auth = await authorization();
    const signature = await signAuthorization(alice, auth, "ReceiveWithAuthorization");
    await expect(send(carol, "receiveWithAuthorization", vrsArgs(auth, signature))).rejects.toThrow(
      "FiatTokenV2: caller must be the payee",
    );

    await send(bob, "receiveWithAuthorization", bytesArgs(auth, signature));
    expect(await balanceOf(bob.address)).toBe(auth.value);
    expect(await authorizationState(alice.address, auth.nonce)).toBe(true);
  });

  it("a canceled authorization can no longer be used", async () => {
    const auth = await authorization();
    const transferSignature = await signAuthorization(alice, auth);
    const cancelSignature = await alice.signTypedData({
      domain,
      types: typedDataTypes,
      primaryType: "CancelAuthorization",
      message: { authorizer: alice.address, nonce: auth.nonce },
    });
    const { v, r, s } = parseSignature(cancelSignature);

    const receipt = await send(carol, "cancelAuthorization", [
      alice.address,
      auth.nonce,
      Number(v),
      r,
      s,
    ]);
    expect(parseEventLogs({ abi: testUsdcArtifact.abi, logs: receipt.logs })).toMatchObject([
      {
        eventName: "AuthorizationCanceled",
        args: { authorizer: alice.address, nonce: auth.nonce },
      },
    ]);
    expect(await authorizationState(alice.address, auth.nonce)).toBe(true);

    await expect(
      send(carol, "transferWithAuthorization", vrsArgs(auth, transferSignature)),
    ).rejects.toThrow("FiatTokenV2: authorization is used or canceled");
    await expect(
      send(carol, "cancelAuthorization", [alice.address, auth.nonce, cancelSignature]),
    ).rejects.toThrow("FiatTokenV2: authorization is used or canceled");
    expect(await balanceOf(alice.address)).toBe(10n * USDC);
  });

  it("asks a contract `from` through ERC-1271 with the bytes overload", async () => {
    const accepting = "0x00000000000000000000000000000000000a1271" as const;
    const refusing = "0x00000000000000000000000000000000000b1271" as const;
    await devnet.testClient.setCode({ address: accepting, bytecode: ACCEPTING_1271_WALLET });
    await devnet.testClient.setCode({ address: refusing, bytecode: REFUSING_1271_WALLET });
    await send(alice, "mint", [accepting, USDC]);
    await send(alice, "mint", [refusing, USDC]);

    const fromRefusing = await authorization({ from: refusing, value: USDC });
    await expect(
      send(carol, "transferWithAuthorization", bytesArgs(fromRefusing, "0xdeadbeef"), usdcAbi),
    ).rejects.toThrow("FiatTokenV2: invalid signature");

    const fromAccepting = await authorization({ from: accepting, value: USDC });
    await send(carol, "transferWithAuthorization", bytesArgs(fromAccepting, "0xdeadbeef"), usdcAbi);
    expect(await balanceOf(accepting)).toBe(0n);
    expect(await balanceOf(bob.address)).toBe(USDC);
  });
});

describe("EIP-2612 permit", () => {
  async function signPermit(value: bigint, nonce: bigint, deadline: bigint) {
    const signature = await alice.signTypedData({
      domain,
      types: typedDataTypes,
      primaryType: "Permit",
      message: { owner: alice.address, spender: bob.address, value, nonce, deadline },
    });
    const { v, r, s } = parseSignature(signature);
    return [alice.address, bob.address, value, deadline, Number(v), r, s] as const;
  }

  it("sets the allowance once per nonce", async () => {
    const deadline = (await latestTimestamp()) + 3600n;
    const permit = await signPermit(5n * USDC, 0n, deadline);

    const receipt = await send(carol, "permit", permit);
    expect(parseEventLogs({ abi: testUsdcArtifact.abi, logs: receipt.logs })).toMatchObject([
      {
        eventName: "Approval",
        args: { owner: alice.address, spender: bob.address, value: 5n * USDC },
      },
    ]);
    expect(await read("allowance", [alice.address, bob.address])).toBe(5n * USDC);
    expect(await read("nonces", [alice.address])).toBe(1n);

    await expect(send(carol, "permit", permit)).rejects.toThrow("EIP2612: invalid signature");

    await send(alice, "mint", [alice.address, 5n * USDC]);
    await send(bob, "transferFrom", [alice.address, carol.address, 2n * USDC]);
    expect(await balanceOf(carol.address)).toBe(2n * USDC);
    expect(await read("allowance", [alice.address, bob.address])).toBe(3n * USDC);
  });

  it("refuses a permit past its deadline", async () => {
    const permit = await signPermit(USDC, 0n, (await latestTimestamp()) - 1n);
    await expect(send(carol, "permit", permit)).rejects.toThrow("FiatTokenV2: permit is expired");
    expect(await read("nonces", [alice.address])).toBe(0n);
  });
});

describe("blacklist", () => {
  it("blocks transfers to and from a blacklisted account until it is unblacklisted", async () => {
    await send(alice, "mint", [alice.address, 10n * USDC]);
    await send(alice, "mint", [bob.address, 10n * USDC]);
    await send(carol, "blacklist", [bob.address]);
    expect(await read("isBlacklisted", [bob.address])).toBe(true);

    await expect(send(alice, "transfer", [bob.address, USDC])).rejects.toThrow(
      "Blacklistable: account is blacklisted",
    );
    await expect(send(bob, "transfer", [alice.address, USDC])).rejects.toThrow(
      "Blacklistable: account is blacklisted",
    );
    const toBob = await authorization({ to: bob.address });
    await expect(
      send(
        carol,
        "transferWithAuthorization",
        vrsArgs(toBob, await signAuthorization(alice, toBob)),
      ),
    ).rejects.toThrow("Blacklistable: account is blacklisted");

    await send(carol, "unBlacklist", [bob.address]);
    expect(await read("isBlacklisted", [bob.address])).toBe(false);
    await send(alice, "transfer", [bob.address, USDC]);
    await send(bob, "transfer", [carol.address, 2n * USDC]);
    expect(await balanceOf(bob.address)).toBe(9n * USDC);
  });
});
