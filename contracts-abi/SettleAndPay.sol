// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/*
 * SettleAndPay: an x402 settlement and its payout in one transaction, both or neither
 * (docs/payments.md#one-transaction-settlement).
 *
 * One call does two things on an EIP-3009 token (USDC):
 *   1. transferWithAuthorization(payer -> payTo, value): the payer's signed authorization;
 *   2. transferFrom(msg.sender -> recipient, payout): the payout, from the CALLER's own
 *      allowance to this contract.
 * If either reverts, the whole call reverts: a used, expired or front-run authorization pays
 * nothing out, and a payout the token refuses (a blacklisted recipient) takes no payment.
 *
 * It has no owner, no storage and holds no funds. The payout leg always spends `msg.sender`'s
 * own allowance, so a stranger calling it can only move their own tokens, and an
 * authorization someone copies from a pending transaction is no more use through here than
 * sent to the token directly (it can only ever pay its `to`). Immutable: nothing to upgrade.
 */
interface IEip3009Token {
    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) external;

    function transferFrom(address from, address to, uint256 value) external returns (bool);
}

contract SettleAndPay {
    struct Authorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
        bytes signature;
    }

    function settleAndPay(
        IEip3009Token token,
        Authorization calldata authorization,
        address recipient,
        uint256 payout
    ) external {
        token.transferWithAuthorization(
            authorization.from,
            authorization.to,
            authorization.value,
            authorization.validAfter,
            authorization.validBefore,
            authorization.nonce,
            authorization.signature
        );
        require(token.transferFrom(msg.sender, recipient, payout), "SettleAndPay: payout refused");
    }
}
