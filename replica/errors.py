"""The root of every error the replica raises: ``ReplicaError``.

``except ReplicaError`` catches whatever running a replica or talking to one refuses; each
package below keeps its own family under it. The tree, complete (``tests/test_error_tree.py``
fails when a public exception class of ``replica`` is missing here or placed wrongly)::

    ReplicaError
    ├── ExecutionError           execution refuses an operator (replica.execution.errors)
    │   ├── CanisterDefinitionError  a Canister subclass breaking the SDK's rules (also TypeError)
    │   ├── InstallError         a canister that cannot be installed
    │   │   └── ModuleLoadError  canister source that does not load
    │   │       ├── SubsetError  a construct outside the sandbox's subset (replica.execution.sandbox)
    │   │       └── SharedStateError  a mutable module-level or class-level value (also TypeError)
    │   └── ManagementError      a management operation on a missing canister
    ├── IcFormatError            bytes or values the IC's wire format refuses, one subclass per
    │   │                        reason, each with its reason (replica.ic.errors; also ValueError)
    │   ├── CborRefused
    │   │   ├── CborTooLarge
    │   │   ├── CborTooDeep
    │   │   ├── CborMalformed
    │   │   ├── CborTrailingBytes
    │   │   └── CborTypeRefused
    │   ├── UnhashableValue
    │   ├── PrincipalError
    │   │   ├── PrincipalTooLong
    │   │   ├── PrincipalTextError
    │   │   │   ├── PrincipalTextTooLong
    │   │   │   ├── PrincipalTextMalformed
    │   │   │   └── PrincipalChecksumMismatch
    │   │   └── NotACanisterPrincipal
    │   ├── PublicKeyError
    │   │   ├── UnsupportedKeyScheme
    │   │   └── MalformedPublicKey
    │   ├── SigningKeyError
    │   ├── MalformedSignature
    │   ├── EnvelopeRefused
    │   │   ├── MalformedEnvelope
    │   │   ├── MalformedContent
    │   │   ├── SenderKeyMismatch
    │   │   ├── AnonymousWithCredentials
    │   │   ├── MissingCredentials
    │   │   ├── SenderSignatureInvalid
    │   │   └── DelegationRefused
    │   │       ├── TooManyDelegations
    │   │       ├── DelegationExpired
    │   │       ├── DelegationTargetRefused
    │   │       ├── TooManyDelegationTargets
    │   │       ├── DelegationKeyRepeated
    │   │       └── DelegationSignatureInvalid
    │   ├── HashTreeRefused
    │   ├── AnswerMalformed
    │   ├── CertificateRefused
    │   │   ├── CertificateMalformed
    │   │   ├── NestedDelegation
    │   │   ├── DelegationSubnetKeyMissing
    │   │   ├── CanisterRangesMissing
    │   │   ├── CanisterOutsideRanges
    │   │   ├── DelegationSubnetMismatch
    │   │   └── CertificateSignatureRefused
    │   ├── QueryResponseRefused     a query answer or its node signatures (replica.ic.query_response)
    │   │   ├── MalformedQueryResponse
    │   │   ├── QueryResponseUnsigned
    │   │   ├── QuerySignerUnknown
    │   │   ├── QuerySignerMismatch
    │   │   └── QuerySignatureInvalid
    │   └── CandidError          Candid text, bytes or values refused (replica.ic.candid)
    │       ├── CandidSyntaxError
    │       ├── CandidTypeError
    │       ├── CandidUnsupported
    │       ├── CandidMalformed
    │       ├── CandidLimitExceeded
    │       ├── CandidTypeMismatch
    │       └── CandidValueRefused
    ├── IngressRefused           a submission refused, one subclass per reason, each with its
    │   │                        reason and HTTP status (replica.client.refusals; also ValueError)
    │   ├── MalformedIngress
    │   │   └── UnsupportedEnvelopeVersion  an envelope of the former format (version 1)
    │   ├── IngressTooLarge
    │   ├── BadIngressSignature
    │   ├── ExpiredIngress
    │   ├── IngressExpiryTooFar
    │   ├── DuplicateIngress
    │   ├── UnknownCanister
    │   ├── CanisterNotOnSubnet
    │   ├── IngressPoolFull
    │   ├── ReceiverMismatch
    │   └── WrongRequestType
    ├── IdentityError            the identity store refuses a name or a key file
    │   │                        (replica.client.identities)
    │   ├── InvalidIdentityName
    │   ├── InvalidKeyType
    │   ├── IdentityExists
    │   ├── UnknownIdentity
    │   ├── IdentityFileTooOpen
    │   └── IdentityUnreadable
    ├── AgentError               a call through the agent without a verified answer
    │   │                        (replica.client.agent_errors)
    │   ├── TransportError
    │   │   └── SubmissionUncertain  no node confirmed a call; it may have been pooled
    │   ├── UnexpectedAnswer
    │   ├── RequestRefused
    │   ├── CanisterNotRouted
    │   ├── CallRejected
    │   ├── CallTimeout
    │   ├── ReplyUnavailable
    │   ├── QueryAnswerInvalid    a query answer whose node signature fails
    │   ├── CertificateInvalid
    │   │   ├── MalformedCertificate
    │   │   ├── CertificateHeightMismatch
    │   │   ├── CertificateSignatureInvalid
    │   │   ├── CertificationRollback
    │   │   ├── CertificateTooOld
    │   │   └── PathNotProven
    │   └── ModuleSpecError      a PATH.py:ClassName naming nothing (replica.client.management)
    ├── ApiError                 a request the ingress HTTP API refuses for another reason, each
    │   │                        with its reason and HTTP status (replica.client.refusals)
    │   ├── InvalidCanisterId
    │   ├── MalformedRequest
    │   ├── PathNotAllowed
    │   ├── RequestStatusForbidden
    │   ├── InvalidSubnetId
    │   ├── RouteNotFound
    │   ├── MethodNotAllowed
    │   ├── BodyTimeout
    │   ├── RequestTooLarge
    │   ├── NotCertifiedYet
    │   ├── DelegationUnavailable
    │   └── NodeUnavailable
    ├── CanisterCodeNotFound     a recorded canister module that cannot be loaded
    │                            (replica.node.batch_processor; also LookupError)
    ├── NodeConfigError          an unusable node config (replica.node.process_config; also ValueError)
    ├── NodeStoreError           a node's own records (replica.node.node_store; also RuntimeError)
    │   ├── CorruptRecordFile
    │   └── ExecutedMismatch
    ├── StateSyncError           checkpoint offers (replica.node.state_sync; also ValueError)
    │   ├── MalformedOffer
    │   │   └── UnsupportedOfferVersion
    │   ├── MalformedFetchRequest
    │   └── StateSyncRefused
    │       ├── OfferHeightTooLow
    │       ├── CertificationMismatch
    │       ├── BadCertification
    │       ├── StateDoesNotDecode
    │       ├── WrongStateHeight
    │       ├── WrongSubnet
    │       └── RootMismatch
    ├── NodeRefused              a node that must not start: its files would risk finalized data
    │                            (replica.node.storage; also RuntimeError)
    ├── FinalizedElsewhere       a block a node refuses: at a height it executed another block at
    │                            (replica.node.consensus_rules; also consensus_stub's InvalidBlock,
    │                            which the agreement protocol catches)
    ├── EmptyBlockMismatch       the same: not its parent's empty successor
    ├── CheckpointFetchError     a peer's checkpoint not fetched (replica.node.agreement_transport;
    │   │                        also RuntimeError)
    │   └── NoCheckpoint
    ├── ClusterError             the local Spark cluster (replica.cluster.errors)
    ├── AuditError               the determinism audit (replica.audit.errors)
    │   ├── RunLogError
    │   ├── RecordError
    │   ├── PerturbationError
    │   │   └── FaultError
    │   ├── ReplayError
    │   ├── IsolationError
    │   ├── WorkloadError
    │   └── EnvironmentArchiveError
    ├── TestnetError             a testnet directory or one of its processes is unusable
    │   │                        (replica.node.testnet_dir; also RuntimeError)
    │   └── ForkError            a fork that cannot be made (replica.testnet.fork)
    │       └── ForkInconsistent the chosen heights disagree on the messages between subnets
    ├── SubnetError              a subnet in one process cannot go on (replica.inprocess.subnet;
    │   │                        also RuntimeError)
    │   ├── DivergenceError
    │   ├── NoBlockFinalized
    │   └── CertificationStalled no root of a height has t shares (its text: who signed which)
    ├── MigrationError           a canister migration step (replica.testnet.migration; also RuntimeError)
    ├── LoadFailed               a load run ended by an error, with its report so far
    │                            (replica.load.load_report)
    ├── StatusError              a subnet's certified status unreadable (replica.observe.stream_status;
    │                            also RuntimeError)
    └── TestingError             the Python API for app developers (replica.testing.errors)
        ├── UnknownSubnet        (also LookupError)
        ├── UnknownNode          (also LookupError)
        ├── UnknownMessage       (also LookupError)
        ├── CallNotAnswered      (also TimeoutError)
        ├── NotInThisMode
        ├── CanisterSourceError  (also ValueError)
        └── TimeRegression       (also ValueError)

Apart from it stand the exceptions canister code raises and catches, the SDK's
(``replica.execution.errors``): they are a canister's control flow, not the replica's
refusals, so an ``except ReplicaError`` around the replica never swallows them::

    Trap                         abort the current message (any uncaught exception does)
    └── ApiUsageError            the SDK used wrongly
    CallError                    an outgoing call not queued; the canister may recover

and the sandbox's faults (``replica.execution.sandbox``), which stop a message at a limit;
they derive from ``BaseException`` so that canister code cannot catch them::

    SandboxFault                 a limit of the sandbox stopped the message
    ├── InstructionLimitExceeded the message's instruction limit
    ├── MemoryLimitExceeded      the message's allocation limit
    ├── DepthLimitExceeded       canister functions nested too deep
    └── HostLimitExceeded        CPython's own recursion or memory limit

Each class keeps the built-in class it had before it had this root (``LookupError``,
``RuntimeError``, ``ValueError``, ...), so narrower handlers keep working. The other packages
have one root each: ``state_manager.errors.StateManagerError``,
``message_routing.errors.MessageRoutingError``, ``xnet.errors.XNetError`` and
``consensus_stub.errors.ConsensusError``.
"""

from __future__ import annotations

__all__ = ["ReplicaError"]


class ReplicaError(Exception):
    """Root of every error the replica raises (the module docstring has the tree)."""
