/**
 * The SettleAndPay contract (SettleAndPay.sol): an x402 settlement and its payout in one
 * transaction (docs/payments.md#one-transaction-settlement). Its ABI, typed for viem; a unit
 * test holds it equal to the compiled artifact's.
 */
export const settleAndPayAbi = [
  {
    type: "function",
    name: "settleAndPay",
    stateMutability: "nonpayable",
    inputs: [
      { name: "token", type: "address" },
      {
        name: "authorization",
        type: "tuple",
        components: [
          { name: "from", type: "address" },
          { name: "to", type: "address" },
          { name: "value", type: "uint256" },
          { name: "validAfter", type: "uint256" },
          { name: "validBefore", type: "uint256" },
          { name: "nonce", type: "bytes32" },
          { name: "signature", type: "bytes" },
        ],
      },
      { name: "recipient", type: "address" },
      { name: "payout", type: "uint256" },
    ],
    outputs: [],
  },
] as const;
