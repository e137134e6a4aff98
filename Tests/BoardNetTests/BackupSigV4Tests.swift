import BoardModel
import BoardNet
import Testing

/// SigV4 against the values AWS publishes for its S3 examples (Amazon S3 API Reference,
/// "Signature Calculations for the Authorization Header: Transferring Payload in a Single
/// Chunk", Example: GET Object), step by step, and the pieces S3 requests here depend on.
@Suite struct BackupSigV4Tests {
    let signer = SigV4(accessKey: "AKIAIOSFODNN7EXAMPLE", secretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", region: "us-east-1")
    let headers = [("Host", "examplebucket.s3.amazonaws.com"), ("Range", "bytes=0-9"),
                   ("x-amz-content-sha256", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
                   ("x-amz-date", "20130524T000000Z")]

    @Test func awsGetObjectExampleStepByStep() {
        #expect(SigV4.emptyPayloadHash == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        let (request, signed) = SigV4.canonicalRequest(method: "GET", path: "/test.txt", query: [], headers: headers,
                                                       payloadHash: SigV4.emptyPayloadHash)
        #expect(request == """
            GET
            /test.txt

            host:examplebucket.s3.amazonaws.com
            range:bytes=0-9
            x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
            x-amz-date:20130524T000000Z

            host;range;x-amz-content-sha256;x-amz-date
            e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
            """)
        #expect(signed == "host;range;x-amz-content-sha256;x-amz-date")
        let toSign = signer.stringToSign(canonicalRequest: request, date: "20130524T000000Z")
        #expect(toSign == """
            AWS4-HMAC-SHA256
            20130524T000000Z
            20130524/us-east-1/s3/aws4_request
            7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972
            """)
        #expect(signer.signature(stringToSign: toSign, date: "20130524T000000Z") == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(signer.authorization(method: "GET", path: "/test.txt", query: [], headers: headers, payloadHash: SigV4.emptyPayloadHash,
                                     date: "20130524T000000Z")
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    }

    @Test func anyChangeChangesTheSignature() {
        let base = signer.authorization(method: "GET", path: "/test.txt", query: [], headers: headers, payloadHash: SigV4.emptyPayloadHash, date: "20130524T000000Z")
        var other = signer
        other.secretKey += "x"
        #expect(other.authorization(method: "GET", path: "/test.txt", query: [], headers: headers, payloadHash: SigV4.emptyPayloadHash, date: "20130524T000000Z") != base)
        #expect(signer.authorization(method: "PUT", path: "/test.txt", query: [], headers: headers, payloadHash: SigV4.emptyPayloadHash, date: "20130524T000000Z") != base)
        #expect(signer.authorization(method: "GET", path: "/test.txt", query: [], headers: headers, payloadHash: SigV4.emptyPayloadHash, date: "20130525T000000Z") != base)
    }

    @Test func encodingAndQueriesFollowTheRules() {
        #expect(SigV4.uriEncode("boards/a b/manifest.json", keepSlash: true) == "boards/a%20b/manifest.json")
        #expect(SigV4.uriEncode("a/b~c_d-e.f", keepSlash: false) == "a%2Fb~c_d-e.f")
        #expect(SigV4.uriEncode("é", keepSlash: false) == "%C3%A9")
        // Sorted by name, encoded (the list request's).
        #expect(SigV4.canonicalQuery([("prefix", "J"), ("max-keys", "2")]) == "max-keys=2&prefix=J")
        #expect(SigV4.canonicalQuery([("list-type", "2"), ("continuation-token", "a+b=")]) == "continuation-token=a%2Bb%3D&list-type=2")
        #expect(SigV4.amzDate(1_369_353_600) == "20130524T000000Z")
    }
}
