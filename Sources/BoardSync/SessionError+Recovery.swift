/// What a client should do after a session closed for a reason: every code is one of three,
/// so a live client (and `board-sync peer`) never retries what cannot succeed and never gives
/// up on what will. docs/PROTOCOL.md lists the codes by class.
extension SessionError {
    public enum Recovery: Sendable, Equatable {
        /// Transient (the link, the server's load, its storage, a restart): dial again after a
        /// backoff.
        case retry
        /// The credentials no longer let this connection in (the token expired): ask the
        /// credentials provider for fresh ones once and dial again; if the server refuses
        /// those too, stop.
        case refreshCredentials
        /// Dialing again with the same board, data and credentials would be refused again
        /// (read-only, not the author, a bad board name, a version or limit that will not
        /// change): stop and say why.
        case stop
    }

    /// What a client should do after a session closed with this error. Errors this side found
    /// in the other's bytes (`remote` false) are the link's or the other side's trouble and
    /// worth a retry, except a protocol version neither side can change.
    public var recovery: Recovery {
        if !remote {
            return code == .unsupportedVersion ? .stop : .retry
        }
        return code.recovery
    }
}

extension SessionError.Code {
    /// What a peer should do when the other side closed with this code.
    public var recovery: SessionError.Recovery {
        switch self {
        case .malformedFrame, .badChecksum, .idleTimeout, .slowReader, .shuttingDown, .internalError, .busy,
             .tooFast, .storageUnavailable:
            return .retry
        case .tokenExpired:
            return .refreshCredentials
        case .frameTooLarge, .unsupportedVersion, .unknownMessage, .badBoardName, .unauthorized, .unexpectedMessage,
             .invalidOperations, .assetMismatch, .assetTooLarge, .boardMismatch, .readOnly, .notAuthor, .limitReached,
             .boardDeleted:
            return .stop
        }
    }
}
